//! `iolab import`: years of fio JSON outputs already exist on people's disks; storing each file
//! as a run lets `show` and `compare` treat them like runs iolab made itself.
//!
//! What an imported file cannot tell is *where* it ran: fio's JSON names no kernel, and names a
//! host only in client mode. Claiming this machine's host and kernel would make a comparison
//! "kernel=6.1 vs kernel=6.6" silently wrong, so those tags come from the user (`--tag`), from
//! fio's client-mode hostname, or are recorded as `unknown`. Every file is parsed before
//! anything is written, so a bad file in the list stores nothing and the error names it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::Value;

use super::import_cells::{configuration, stored_configuration, ImportCells};
use crate::store::{NewExperiment, NewRun, RunStatus, Store};
use crate::workload::fio_json::{self, FioReport};
use crate::workload::runner::errno_name;

/// The tag value for a host or kernel nobody told us.
pub(crate) const UNKNOWN: &str = "unknown";

/// The cell key of runs without factors (the plan uses the same word).
pub(crate) const BASE_CELL: &str = "base";

#[derive(Debug, Clone, Default)]
pub(crate) struct ImportOptions {
    /// `--tag NAME=VALUE`, in order; a later value for the same name wins.
    pub tags: Vec<(String, String)>,
    /// Add to the imported experiment of this name (created when missing).
    pub experiment: Option<String>,
}

/// What one file, or one fio run of a file holding several, became.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ImportedRun {
    pub file: String,
    /// Which fio run of the file this is (from 1), when it holds several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_in_file: Option<usize>,
    pub run_id: i64,
    pub status: String,
    pub reason: Option<String>,
    pub metrics: usize,
}

#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ImportSummary {
    pub experiment_id: i64,
    pub experiment_name: String,
    pub created: bool,
    /// The fio options whose values differ between the experiment's outputs: its factors,
    /// a cell per combination of their values.
    pub factors: Vec<String>,
    /// Options saying where a job ran, what it was called or its seed, whose values differ
    /// too: no factors (see `import_cells`).
    pub places: Vec<String>,
    /// Runs stored before whose cell changed with the options these outputs set apart.
    pub regrouped: usize,
    /// What the figures may not mean, by file.
    pub warnings: Vec<String>,
    pub runs: Vec<ImportedRun>,
    /// The database the runs went into (for the text only).
    #[serde(skip)]
    pub db_path: String,
}

impl crate::output::Render for ImportSummary {
    fn text(&self) -> String {
        use crate::report::format::terminal_safe as safe;
        let ok = self.runs.iter().filter(|r| r.status == "ok").count();
        let mut out = format!(
            "{} {} run{} into experiment {} \"{}\" ({} ok, {} failed) in {}\n",
            if self.created { "imported" } else { "added" },
            self.runs.len(),
            if self.runs.len() == 1 { "" } else { "s" },
            self.experiment_id,
            safe(&self.experiment_name),
            ok,
            self.runs.len() - ok,
            self.db_path
        );
        match self.factors.as_slice() {
            [] => {}
            [one] => out.push_str(&format!(
                "  a cell per value of {}, the fio option the outputs set apart\n",
                safe(one)
            )),
            many => out.push_str(&format!(
                "  a cell per combination of {}, the fio options the outputs set apart\n",
                safe(&many.join(", "))
            )),
        }
        if self.regrouped > 0 {
            out.push_str(&format!(
                "  {} run{} stored before moved to {} cell{} with them\n",
                self.regrouped,
                if self.regrouped == 1 { "" } else { "s" },
                if self.regrouped == 1 { "its" } else { "their" },
                if self.regrouped == 1 { "" } else { "s" },
            ));
        }
        if !self.places.is_empty() {
            out.push_str(&format!(
                "  the outputs also differ in {}, which say where a job ran, what it was \
                 called or which random numbers it drew, not how: runs are not split by them; \
                 tag them apart (--tag NAME=VALUE) to compare them\n",
                safe(&self.places.join(", "))
            ));
        }
        for w in &self.warnings {
            out.push_str(&format!("warning: {}\n", safe(w)));
        }
        let mut files: Vec<(&str, usize)> = Vec::new();
        for r in self.runs.iter().filter(|r| r.run_in_file.is_some()) {
            match files.last_mut() {
                Some((file, n)) if *file == r.file => *n += 1,
                _ => files.push((&r.file, 1)),
            }
        }
        for (file, n) in files {
            out.push_str(&format!(
                "  {}: the outputs of {n} fio runs, one after another: a run each\n",
                safe(file)
            ));
        }
        for r in self.runs.iter().filter(|r| r.status != "ok") {
            out.push_str(&format!(
                "  {}{}: run {} failed: {}\n",
                safe(&r.file),
                r.run_in_file
                    .map(|k| format!(" (fio run {k})"))
                    .unwrap_or_default(),
                r.run_id,
                safe(r.reason.as_deref().unwrap_or(""))
            ));
        }
        out
    }
}

/// One file, or one fio run of a file holding several, parsed and ready to store.
pub(crate) struct Parsed {
    path: PathBuf,
    /// Which fio run of the file, and of how many, when it holds several.
    part: Option<(usize, usize)>,
    text: String,
    report: FioReport,
    /// fio's `timestamp` (seconds, end of the run) when present.
    timestamp: Option<f64>,
    mtime: Option<f64>,
}

/// The largest file `import` reads. fio's json+ output is about 40 KB per job and direction,
/// so 64 MiB holds hundreds of jobs; anything larger (or endless, like /dev/zero) is not one
/// fio run and would only exhaust memory.
pub(crate) const MAX_FILE_BYTES: u64 = 64 << 20;

/// Reads at most `limit + 1` bytes, so an endless file costs no more than a large one.
fn read_limited(path: &Path, limit: u64) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .with_context(|| format!("{}: cannot open it for reading", path.display()))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}: reading it", path.display()))?;
    if bytes.len() as u64 > limit {
        bail!(
            "{}: larger than {limit} bytes, which no single fio output is; import the \
             --output-format=json or json+ file of one fio run",
            path.display()
        );
    }
    Ok(bytes)
}

impl Parsed {
    fn name(&self) -> String {
        name_of(&self.path, self.part)
    }
}

/// A file, and which of its fio runs is meant when it holds several, for messages.
fn name_of(path: &Path, part: Option<(usize, usize)>) -> String {
    match part {
        Some((k, n)) => format!("{} (fio run {k} of {n})", path.display()),
        None => path.display().to_string(),
    }
}

/// A file's fio runs: one, or each of several runs' outputs written one after another.
fn read_one(path: &Path) -> anyhow::Result<Vec<Parsed>> {
    let bytes = read_limited(path, MAX_FILE_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    let mtime = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    let parts = crate::workload::fio_runs::split(&text);
    let count = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let part = (count > 1).then_some((i + 1, count));
            let report = fio_json::parse(text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", name_of(path, part)))?;
            Ok(Parsed {
                path: path.to_path_buf(),
                part,
                timestamp: last_timestamp(text),
                text: text.to_string(),
                report,
                mtime,
            })
        })
        .collect()
}

/// fio's `timestamp` of the last complete document (status-interval output holds several).
fn last_timestamp(text: &str) -> Option<f64> {
    let start = text
        .find("\n{")
        .map(|i| i + 1)
        .or_else(|| text.starts_with('{').then_some(0))?;
    serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .map_while(Result::ok)
        .filter_map(|doc| doc.get("timestamp").and_then(Value::as_f64))
        .last()
}

/// The host a client-mode run names, when all its jobs name the same one and it is a tag
/// value like any other (a name a `compare` selector could never write stays out).
fn client_host(report: &FioReport) -> Option<String> {
    let mut hosts = report.jobs.iter().filter_map(|j| j.hostname.as_deref());
    let first = hosts.next()?;
    (hosts.all(|h| h == first) && crate::store::tags::check_value("host", first).is_ok())
        .then(|| first.to_string())
}

fn status_of(report: &FioReport) -> RunStatus {
    match report.first_error() {
        Some((job, errno)) => RunStatus::Failed(format!(
            "fio job {job:?} reported error {errno} ({})",
            errno_name(errno)
        )),
        None if !report.did_io() => {
            RunStatus::Failed("fio did no I/O (every job completed 0 I/Os)".into())
        }
        None => RunStatus::Ok,
    }
}

/// Reads and parses every file, before the database is even opened: a bad file in the list
/// stores nothing, creates no database, and the error names it.
pub(crate) fn read_files(files: &[PathBuf]) -> anyhow::Result<Vec<Parsed>> {
    if files.is_empty() {
        bail!("no files to import");
    }
    let mut parsed: Vec<Parsed> = Vec::with_capacity(files.len());
    let mut errors = Vec::new();
    for (i, f) in files.iter().enumerate() {
        if files[..i].contains(f) {
            errors.push(format!("{}: named twice", f.display()));
            continue;
        }
        match read_one(f) {
            Ok(runs) => {
                for p in runs {
                    // One measurement given twice would count as two repetitions with no
                    // spread.
                    match parsed.iter().find(|q| q.text == p.text) {
                        Some(first) => errors.push(format!(
                            "{}: holds the same fio output as {}: one measurement would count \
                             as two runs",
                            p.name(),
                            first.name()
                        )),
                        None => parsed.push(p),
                    }
                }
            }
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    if !errors.is_empty() {
        bail!(
            "nothing imported; {} of {} files cannot be imported:\n  {}",
            errors.len(),
            files.len(),
            errors.join("\n  ")
        );
    }
    Ok(parsed)
}

/// Stores the files [`read_files`] parsed into `store`; see the module comment for host and
/// kernel tags.
pub(crate) fn import_files(
    store: &mut Store,
    parsed: Vec<Parsed>,
    opts: &ImportOptions,
) -> anyhow::Result<ImportSummary> {
    let keys: Vec<Option<String>> = parsed
        .iter()
        .map(|p| fio_json::measurement_key(&p.text))
        .collect();
    refuse_repeats(&parsed, &keys)?;
    let existing = Destination::existing(store, opts)?;
    if let Some(e) = &existing {
        refuse_duplicates(store, &parsed, &keys, e.id)?;
    }
    let kernel = opts.tag("kernel").unwrap_or_else(|| UNKNOWN.to_string());
    let before = match &existing {
        Some(e) => stored_configurations(store, e.id)?,
        None => Vec::new(),
    };
    let configs: Vec<_> = parsed.iter().map(|p| configuration(&p.report)).collect();
    let warnings = parsed
        .iter()
        .filter_map(|p| {
            let groups = p.report.groups()?;
            Some(format!(
                "{}: its jobs are in {groups} reporting groups (new_group or stonewall); \
                 their rates are summed, which holds if the groups ran together (new_group), \
                 not one after another (stonewall), and fio's JSON does not say which",
                name_of(&p.path, p.part)
            ))
        })
        .collect();
    let all: Vec<_> = before
        .iter()
        .map(|(_, c)| c.clone())
        .chain(configs.clone())
        .collect();
    let cells = ImportCells::of(&all);
    let to = Destination::find_or_create(store, existing, &parsed, opts, &kernel)?;
    let mut regrouped = 0;
    for (run, config) in &before {
        let (key, levels) = cells.cell(config);
        if key != run.cell_key {
            store
                .set_run_cell(run.id, &key, &levels)
                .with_context(|| format!("regrouping run {}", run.id))?;
            regrouped += 1;
        }
    }
    // Each cell counts its own repetitions, from its last already stored (under its cell as
    // regrouped): numbered across the experiment, a cell's runs read as repetitions 3 and 4.
    let mut last_rep: BTreeMap<String, u32> = BTreeMap::new();
    for (run, config) in &before {
        let rep = last_rep.entry(cells.cell(config).0).or_default();
        *rep = (*rep).max(run.repetition);
    }
    // Stored in the order they ran (fio's timestamp, else the file's time), so run ids and
    // `runs` follow time, not file names.
    let mut parsed: Vec<(Parsed, &_)> = parsed.into_iter().zip(&configs).collect();
    parsed.sort_by(|(a, _), (b, _)| {
        let end = |p: &Parsed| p.timestamp.or(p.mtime).unwrap_or(f64::INFINITY);
        end(a).total_cmp(&end(b))
    });
    let mut runs = Vec::with_capacity(parsed.len());
    for (p, config) in parsed {
        let status = status_of(&p.report);
        let metrics = if status == RunStatus::Ok {
            p.report.metrics()
        } else {
            Vec::new()
        };
        let (file, run_in_file) = (p.path.display().to_string(), p.part.map(|(k, _)| k));
        let tags = run_tags(opts, &p.report, &kernel);
        let cell = cells.cell(config);
        let last = last_rep.entry(cell.0.clone()).or_default();
        *last = last.checked_add(1).ok_or_else(|| {
            anyhow::anyhow!(
                "cell {} of experiment {:?} already has repetition {last}, the last there can be",
                cell.0,
                to.name
            )
        })?;
        let repetition = *last;
        let run = new_run(
            p,
            to.id,
            cell,
            repetition,
            status.clone(),
            metrics.clone(),
            tags,
        );
        let run_id = store
            .insert_run(&run)
            .with_context(|| format!("{file}: storing the run"))?;
        runs.push(ImportedRun {
            file,
            run_in_file,
            run_id,
            status: status.as_str().to_string(),
            reason: status.reason().map(str::to_string),
            metrics: metrics.len(),
        });
    }
    Ok(ImportSummary {
        experiment_id: to.id,
        experiment_name: to.name,
        created: to.created,
        factors: cells.factors,
        places: cells.places,
        regrouped,
        warnings,
        runs,
        db_path: store.path().to_string(),
    })
}

/// The runs an imported experiment holds with the configuration of each one's fio output
/// (a run whose output cannot be read keeps its cell).
fn stored_configurations(
    store: &Store,
    experiment: i64,
) -> anyhow::Result<Vec<(crate::store::Run, BTreeMap<String, String>)>> {
    let mut out = Vec::new();
    for run in store.runs(experiment)? {
        if let Some(config) = stored_configuration(store, run.id)? {
            out.push((run, config));
        }
    }
    Ok(out)
}

/// Refuses, before anything is stored, a file stored already in the experiment
/// `--experiment` adds to (`read_files` refuses one given twice): one measurement stored twice
/// would count as two repetitions, with a spread of zero. (The same file in another
/// experiment is another question, such as the same output under other tags.)
/// `keys`: each of `parsed`'s [`fio_json::measurement_key`].
fn refuse_duplicates(
    store: &Store,
    parsed: &[Parsed],
    keys: &[Option<String>],
    experiment: i64,
) -> anyhow::Result<()> {
    // By measurement, not by bytes: the same output reformatted, or behind another first
    // line, was stored again.
    let mut stored = BTreeMap::new();
    for run in store.runs(experiment)? {
        let text = store.run_texts(run.id)?.and_then(|t| t.fio_json);
        if let Some(key) = text.as_deref().and_then(fio_json::measurement_key) {
            stored.entry(key).or_insert(run.id);
        }
    }
    for (p, key) in parsed.iter().zip(keys) {
        if let Some(run) = key.as_ref().and_then(|k| stored.get(k)) {
            bail!(
                "nothing imported: {} is stored already in experiment {experiment}, as run \
                 {run}: one measurement would count as two runs",
                p.name()
            );
        }
    }
    Ok(())
}

/// Refuses two of the files (or fio runs of files) given that hold one measurement (the same
/// of `keys`, [`fio_json::measurement_key`]): stored twice, it would count as two repetitions.
fn refuse_repeats(parsed: &[Parsed], keys: &[Option<String>]) -> anyhow::Result<()> {
    let mut seen: BTreeMap<&str, &Parsed> = BTreeMap::new();
    for (p, key) in parsed.iter().zip(keys) {
        let Some(key) = key else {
            continue;
        };
        if let Some(first) = seen.insert(key, p) {
            bail!(
                "nothing imported: {} and {} hold one measurement (fio's last report is the \
                 same): stored twice, it would count as two runs",
                first.name(),
                p.name()
            );
        }
    }
    Ok(())
}

impl ImportOptions {
    /// The last value given for a tag.
    fn tag(&self, name: &str) -> Option<String> {
        self.tags
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }
}

/// The experiment the runs go into: the imported one named by `--experiment`, or a new one.
struct Destination {
    id: i64,
    name: String,
    created: bool,
}

impl Destination {
    /// The imported experiment `--experiment` names, by its name or else its id, if it is
    /// there. A name several imported experiments share is refused: adding to whichever came
    /// first would mix runs into one the user did not mean.
    fn existing(
        store: &Store,
        opts: &ImportOptions,
    ) -> anyhow::Result<Option<crate::store::Experiment>> {
        let Some(name) = &opts.experiment else {
            return Ok(None);
        };
        let all = store.experiments()?;
        let mut named: Vec<_> = all
            .iter()
            .filter(|e| &e.name == name && e.status == "imported")
            .collect();
        if named.len() > 1 {
            let ids: Vec<String> = named.iter().map(|e| e.id.to_string()).collect();
            bail!(
                "nothing imported: imported experiments {} are all named {name:?}; name the \
                 one to add to by its id (--experiment {})",
                ids.join(", "),
                ids[0]
            );
        }
        if let Some(e) = named.pop() {
            return Ok(Some(e.clone()));
        }
        // A new experiment named like one `run` made would pass for it (or it for the
        // import) in every list: the name is taken.
        if let Some(e) = all.iter().find(|e| &e.name == name) {
            bail!(
                "nothing imported: experiment {} is named {name:?} and is not an imported one \
                 (its status is {}); runs are added only to experiments `import` made: name \
                 the import otherwise",
                e.id,
                e.status
            );
        }
        let by_id = name
            .parse::<i64>()
            .ok()
            .and_then(|id| all.iter().find(|e| e.id == id));
        match by_id {
            Some(e) if e.status == "imported" => Ok(Some(e.clone())),
            Some(e) => bail!(
                "nothing imported: experiment {} \"{}\" is not an imported one (its status is \
                 {}); runs are added only to experiments `import` made",
                e.id,
                e.name,
                e.status
            ),
            // A number names an experiment by its id: a mistyped one would make a new
            // experiment named by the number.
            None if name.parse::<i64>().is_ok() => bail!(
                "nothing imported: no experiment {name} (ids: {}); a new experiment needs a \
                 name that is not a number",
                all.iter()
                    .map(|e| e.id.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => Ok(None),
        }
    }

    fn find_or_create(
        store: &mut Store,
        existing: Option<crate::store::Experiment>,
        parsed: &[Parsed],
        opts: &ImportOptions,
        kernel: &str,
    ) -> anyhow::Result<Destination> {
        if let Some(e) = existing {
            return Ok(Destination {
                id: e.id,
                name: e.name,
                created: false,
            });
        }
        let name = opts.experiment.clone().unwrap_or_else(|| {
            let mut files = parsed.iter().filter(|p| p.part.is_none_or(|(k, _)| k == 1));
            let first = files.next().map_or_else(String::new, |p| {
                p.path.file_name().map_or_else(
                    || p.path.display().to_string(),
                    |n| n.to_string_lossy().into(),
                )
            });
            match files.count() {
                0 => format!("import of {first}"),
                more => format!("import of {first} and {more} more"),
            }
        });
        let listing: String = parsed.iter().map(|p| format!("# {}\n", p.name())).collect();
        let id = store.create_experiment_with_status(
            &NewExperiment {
                name: name.clone(),
                file_text: format!("# imported fio outputs\n{listing}"),
                seed: 0,
                planned_order: Value::Null,
                host: opts.tag("host").unwrap_or_else(|| UNKNOWN.to_string()),
                kernel: kernel.to_string(),
                part_of: None,
            },
            "imported",
        )?;
        Ok(Destination {
            id,
            name,
            created: true,
        })
    }
}

/// A run's tags: its host (given, else the fio client's, else unknown), the kernel, then
/// every other tag given (the last value of each).
fn run_tags(opts: &ImportOptions, report: &FioReport, kernel: &str) -> Vec<(String, String)> {
    let run_host = opts
        .tag("host")
        .or_else(|| client_host(report))
        .unwrap_or_else(|| UNKNOWN.to_string());
    let mut tags = vec![
        ("host".to_string(), run_host),
        ("kernel".to_string(), kernel.to_string()),
    ];
    for (n, v) in &opts.tags {
        if n != "host" && n != "kernel" {
            tags.retain(|(m, _)| m != n);
            tags.push((n.clone(), v.clone()));
        }
    }
    tags
}

/// One imported file as a run: it ended at fio's timestamp (else the file's time) and lasted
/// as long as its longest job.
fn new_run(
    p: Parsed,
    experiment_id: i64,
    (cell_key, cell_levels): (String, Value),
    repetition: u32,
    status: RunStatus,
    metrics: Vec<(String, f64)>,
    tags: Vec<(String, String)>,
) -> NewRun {
    let runtime_s = p
        .report
        .jobs
        .iter()
        .flat_map(|j| [j.read.runtime_ms, j.write.runtime_ms, j.trim.runtime_ms])
        .max()
        .unwrap_or(0) as f64
        / 1000.0;
    let end = p.timestamp.or(p.mtime).unwrap_or(0.0);
    NewRun {
        experiment_id,
        cell_key,
        cell_levels,
        repetition,
        warmup: false,
        start_unix: end - runtime_s,
        end_unix: end,
        status,
        fio_json: Some(p.text),
        fio_command: None,
        job_file: None,
        tags,
        metrics,
        samples: Vec::new(),
        trace: None,
        // What can be checked without samples: fio's percentiles against its histogram.
        checks: serde_json::to_value(crate::experiment::run::checks::percentiles_vs_bins(
            &p.report,
        ))
        .ok()
        .filter(|c| c.as_array().is_some_and(|a| !a.is_empty())),
        // All an imported file says of its environment: fio's version.
        environment: p.report.version.as_ref().map(|v| {
            crate::experiment::run::environment::RunEnvironment {
                fio_version: Some(v.clone()),
                ..Default::default()
            }
            .to_value()
        }),
        sample_window: None,
        series: Vec::new(),
    }
}

/// The first bytes of every SQLite 3 file: what tells an iolab database from fio output.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Whether `path` is an SQLite database (an iolab one is checked when it is opened).
pub(crate) fn is_database(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == SQLITE_MAGIC)
}

/// What merging other iolab databases came to.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct MergeSummary {
    pub db: String,
    pub sources: Vec<crate::store::MergeReport>,
}

impl crate::output::Render for MergeSummary {
    fn text(&self) -> String {
        use crate::report::format::terminal_safe as safe;
        let mut out = String::new();
        for s in &self.sources {
            let runs: u64 = s.merged.iter().map(|m| m.runs).sum();
            out.push_str(&format!(
                "{}: {} experiment{} ({} runs) merged into {}",
                safe(&s.source),
                s.merged.len(),
                if s.merged.len() == 1 { "" } else { "s" },
                runs,
                safe(&self.db)
            ));
            if !s.grown.is_empty() {
                let added: u64 = s.grown.iter().map(|m| m.runs).sum();
                out.push_str(&format!(
                    ", {added} new run{} of {} merged before",
                    if added == 1 { "" } else { "s" },
                    s.grown.len()
                ));
            }
            if !s.skipped.is_empty() {
                out.push_str(&format!(", {} left out", s.skipped.len()));
            }
            out.push('\n');
            for m in &s.merged {
                out.push_str(&format!(
                    "  experiment {} \"{}\" ({} runs) is now {}",
                    m.from,
                    safe(&m.name),
                    m.runs,
                    m.to
                ));
                if !m.parts.is_empty() {
                    let parts: Vec<String> = m.parts.iter().map(i64::to_string).collect();
                    out.push_str(&format!(" (its hosts' parts: {})", parts.join(", ")));
                }
                out.push('\n');
            }
            for g in &s.grown {
                out.push_str(&format!(
                    "  experiment {} \"{}\": {} new run{} added to experiment {}, where it was merged before\n",
                    g.from,
                    safe(&g.name),
                    g.runs,
                    if g.runs == 1 { "" } else { "s" },
                    g.to
                ));
            }
            for k in &s.skipped {
                out.push_str(&format!(
                    "  experiment {} \"{}\" left out: {}\n",
                    k.from,
                    safe(&k.name),
                    k.why
                ));
            }
        }
        out
    }
}

/// Merges the iolab databases `files` into the one at `db` (see `store::merge`): every file
/// is opened and checked before anything is written, and all go in one transaction.
pub(crate) fn merge_databases(
    db: &Path,
    files: &[PathBuf],
    tags: &[(String, String)],
) -> anyhow::Result<MergeSummary> {
    let same = |f: &Path| match (std::fs::canonicalize(f), std::fs::canonicalize(db)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    let mut sources = Vec::with_capacity(files.len());
    for f in files {
        if same(f) {
            bail!(
                "{}: this is the database the runs would go into (--db); name another",
                f.display()
            );
        }
        // A file to import is named as such, not through --db.
        sources.push(Store::open_existing(f).map_err(|e| match e {
            crate::store::StoreError::Foreign { path } => anyhow::anyhow!(
                "{path}: this SQLite file is not an iolab results database (import reads fio \
                 outputs and iolab databases)"
            ),
            e => e.into(),
        })?);
    }
    let mut dest = Store::open(db)?;
    let refs: Vec<&Store> = sources.iter().collect();
    let reports = dest.merge_from(&refs, tags)?;
    Ok(MergeSummary {
        db: db.display().to_string(),
        sources: reports,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_a_run_that_did_no_io_is_a_failed_run() {
        let idle = r#"{"jobs": [{"jobname": "j", "error": 0, "read": {"total_ios": 0},
            "write": {"total_ios": 0}}]}"#;
        let status = status_of(&fio_json::parse(idle).unwrap());
        assert!(
            matches!(&status, RunStatus::Failed(why) if why.contains("did no I/O")),
            "{status:?}"
        );
    }

    #[test]
    fn reads_stop_after_the_limit() {
        let e = read_limited(Path::new("/dev/zero"), 1000).unwrap_err();
        assert!(e.to_string().contains("/dev/zero: larger than"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("small.json");
        std::fs::write(&f, [b'x'; 1000]).unwrap();
        assert_eq!(read_limited(&f, 1000).unwrap().len(), 1000);
    }

    /// fio's client-mode hostname becomes the `host` tag only when a selector could name it.
    #[test]
    fn a_client_hostname_is_a_tag_only_when_it_follows_the_tag_rule() {
        let report = |host: &str| {
            crate::workload::fio_json::parse(&format!(
                "{{\"fio version\": \"fio-3.33\", \"client_stats\": [{{\"jobname\": \"j\", \
                 \"hostname\": {}, \"error\": 0, \"read\": {{\"iops\": 1.0, \
                 \"bw_bytes\": 1, \"total_ios\": 1}}, \"write\": {{\"iops\": 0.0, \
                 \"bw_bytes\": 0, \"total_ios\": 0}}}}]}}",
                serde_json::to_string(host).unwrap()
            ))
            .unwrap()
        };
        assert_eq!(client_host(&report("db7")).as_deref(), Some("db7"));
        assert_eq!(client_host(&report("db7,evil\u{1b}[31m")), None);
    }

    #[test]
    fn the_last_documents_timestamp_is_the_run_end() {
        let text = "fio: warning\n{\"timestamp\": 10}\n{\"timestamp\": 12, \"jobs\": []}\n";
        assert_eq!(last_timestamp(text), Some(12.0));
        assert_eq!(last_timestamp("no json"), None);
    }
}

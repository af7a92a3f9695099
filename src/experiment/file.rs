//! The experiment file (TOML): what to run, where, how often, and what to vary. Everything is
//! checked here, before anything runs: unknown keys, empty or duplicate levels, impossible knob
//! values, placements that are not placements, fio options that run code or bypass iolab's
//! checks. Every problem is reported at once, each with file:line:column and what is allowed,
//! because a user fixing a file wants the whole list, not one error per attempt. Whether this
//! machine can realise a level (a scheduler that is not loaded, no IRQ to be `on`) is decided
//! later, at plan time, by the machine model.
//!
//! ```toml
//! name = "rq_affinity vs placement"
//! seed = 42
//! repetitions = 5              # or { target_ci = 0.02, min = 3, max = 30 }
//! warmup = true                # one unrecorded run per cell before its first
//! split_cpus = false           # true: one CPU of the placement per fio job clone
//! trace = true                 # record and analyse a block trace of each measured run
//! # [trace]                    # the same, with a cap on the traces kept (instead of trace = true)
//! # keep = "first"             # "all" (default), "first" run of each cell, or "none"
//! # keep_max = "500M"          # keep no more once the kept traces would pass this size
//! [target]
//! device = "default"           # a scratch loop device on /dev/shm; or "nvme0n1"
//! count = 1                    # how many scratch devices (driven at once)
//! # device = ["sdb", "sdc"]    # several named devices, driven at once by one fio run
//! size = "1G"
//! anchor_cpu = 0               # stands in for the interrupt CPU of a device without one
//! # hosts = ["10.0.0.1", "10.0.0.2,8765"]  # fio servers that all run the job at once
//! [workload]                   # plain fio options
//! # job = "my.fio"             # or a fio job file (workload/job_file.rs); options here override it
//! rw = "randread"
//! bs = "4k"
//! [factors]
//! rq_affinity = [0, 1, 2]
//! placement = ["on", "near", "far"]
//! ```

use std::ops::Range;
use std::path::Path;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::factor::{
    Factor, FactorKind, IrqPlacement, Level, LevelValue, Pinning, IRQ_ALLOWED, PLACEMENT_ALLOWED,
};
use super::prepare::Prepare;
use super::queue_knobs;
use super::system_knobs::{self, SystemKnob};
use crate::target::DEFAULT_SCRATCH_BYTES;
use crate::workload::job_file::{self, JobSource};
use crate::workload::options::{self, OptionPolicy, PLACEMENT_OPTIONS, POLLING_ENGINES};
use crate::workload::EngineSpec;

mod engine_table;
mod host_table;

pub use host_table::HostSpec;

/// How many times each cell runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Repetitions {
    Fixed(u32),
    /// Run `min` rounds, then more rounds for the cells whose confidence interval (relative
    /// half-width of the mean of `metric`) is still wider than `target_ci`, up to `max`.
    Adaptive {
        min: u32,
        max: u32,
        target_ci: f64,
        metric: Option<String>,
    },
}

impl Repetitions {
    /// Rounds that always run.
    pub fn min_rounds(&self) -> u32 {
        match self {
            Repetitions::Fixed(n) => *n,
            Repetitions::Adaptive { min, .. } => *min,
        }
    }
    /// Rounds that may run at most.
    pub fn max_rounds(&self) -> u32 {
        match self {
            Repetitions::Fixed(n) => *n,
            Repetitions::Adaptive { max, .. } => *max,
        }
    }
}

/// The device the workload runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetDevice {
    /// A scratch loop device over a RAM-backed file, created and removed by iolab.
    Scratch,
    /// Named block devices (`nvme0n1`, without /dev/), driven at the same time; never
    /// empty, no duplicates.
    Named(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    pub device: TargetDevice,
    /// How many scratch devices to create (`count`); 1 unless the target is the scratch one.
    pub count: u32,
    /// Size of the scratch device in bytes.
    pub size_bytes: u64,
    /// The CPU that stands in for the device's interrupt CPU when placing fio `on`, `near`
    /// or `far` — for devices that take no interrupt (the loop device of the default
    /// target). When set it is used even if the device has interrupts.
    pub anchor_cpu: Option<u32>,
    /// fio servers (`fio --server` on each; "host" or "host,port") that run the job at once
    /// through fio's client mode, on the named device of each. Empty: this machine.
    pub hosts: Vec<String>,
    /// The same hosts, one each in the same order, with how to control them when
    /// `[[target.host]]` says (`host_table`).
    pub host_specs: Vec<HostSpec>,
}

/// The highest CPU number an experiment may name (the kernel's NR_CPUS limit is 8192).
pub const MAX_CPU: u32 = 8191;

/// A validated experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    /// Where the text came from (a path, for messages).
    pub source: String,
    /// The file's text, stored with the experiment; a `[workload] job` file's text (and its
    /// includes') follows as TOML comments, so the store keeps what ran.
    pub text: String,
    pub name: String,
    pub description: Option<String>,
    pub seed: u64,
    pub repetitions: Repetitions,
    pub warmup: bool,
    pub target: TargetSpec,
    /// Plain fio options in file order, values in fio's text form.
    pub workload: Vec<(String, String)>,
    /// Factors in file order; the matrix is the product of their levels.
    pub factors: Vec<Factor>,
    pub policy: OptionPolicy,
    /// Give each of fio's `numjobs` clones its own CPU of the placement
    /// (`cpus_allowed_policy=split`) instead of sharing them all.
    pub split_cpus: bool,
    /// Record a block trace of the target device during each measured run, store it beside
    /// the results and store its headline figures as `trace_*` metrics.
    pub trace: bool,
    /// Steps before every measured run (`[prepare]`).
    pub prepare: Prepare,
    /// Machine-wide controls set once for the whole experiment (`[stabilise]`).
    pub stabilise: Stabilise,
    /// Which traces stay on disk once analysed (`[trace] keep`, `keep_max`).
    pub trace_keep: TraceKeep,
    /// What runs: fio (the default) or a program engine (`engine`, with its table).
    pub engine: EngineSpec,
}

/// `[stabilise]`: machine-wide controls set before the first run and put back after the last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stabilise {
    /// `preflight = true`: what preflight advises where this machine has it (the performance
    /// governor, boost off, no idle state deeper than C1).
    pub advice: bool,
    /// Controls named in the table, with their normalised values, in file order.
    pub settings: Vec<(SystemKnob, String)>,
}

/// Which measured runs keep their trace files (every traced run is analysed and its `trace_*`
/// metrics stored either way): traces take 15-175 MB per run, compressed a few times less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeepRuns {
    #[default]
    All,
    /// The first traced run of each cell.
    First,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceKeep {
    pub runs: KeepRuns,
    /// Most bytes the kept (compressed) traces of one experiment may take: a trace that would
    /// pass it is removed, and so is every later one.
    pub max_bytes: Option<u64>,
}

impl TargetSpec {
    /// Every host is controlled over SSH (and there is at least one).
    pub fn controlled(&self) -> bool {
        !self.host_specs.is_empty() && self.host_specs.iter().all(|h| h.ssh.is_some())
    }

    /// How many devices the workload drives at once.
    pub fn device_count(&self) -> usize {
        match &self.device {
            TargetDevice::Scratch => self.count as usize,
            TargetDevice::Named(names) => names.len(),
        }
    }
}

impl Experiment {
    pub fn factor(&self, name: &str) -> Option<&Factor> {
        self.factors.iter().find(|f| f.name == name)
    }

    /// Why the base workload writes, if it does (a factor may still make a cell write).
    pub fn workload_writes(&self) -> Option<String> {
        options::writes(self.workload.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    }
}

/// One problem in an experiment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// What would have been accepted.
    pub allowed: Option<String>,
}

/// Everything wrong with an experiment file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ExperimentError {
    pub source_name: String,
    pub diagnostics: Vec<Diagnostic>,
}

impl std::fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(
                f,
                "{}:{}:{}: {}",
                self.source_name, d.line, d.column, d.message
            )?;
            if let Some(allowed) = &d.allowed {
                write!(f, "\n    allowed: {allowed}")?;
            }
        }
        Ok(())
    }
}

/// Reads and validates an experiment file.
pub fn load(path: &Path) -> Result<Experiment, ExperimentError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ExperimentError {
        source_name: source.clone(),
        diagnostics: vec![Diagnostic {
            line: 0,
            column: 0,
            message: format!("cannot read the experiment file: {e}"),
            allowed: None,
        }],
    })?;
    parse_with(&source, &text, &job_file::Disk)
}

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "seed",
    "repetitions",
    "warmup",
    "split_cpus",
    "trace",
    "allow_exec",
    "allow_unknown_fio_options",
    "engine",
    "command",
    "iperf3",
    "sockperf",
    "target",
    "workload",
    "factors",
    "prepare",
    "stabilise",
];
const PREPARE_KEYS: &[&str] = &["sync", "drop_caches", "settle"];
const TARGET_KEYS: &[&str] = &["device", "count", "size", "anchor_cpu", "hosts", "host"];
const TRACE_KEYS: &[&str] = &["keep", "keep_max"];

/// Most scratch devices one experiment may create (each is RAM-backed).
pub const MAX_SCRATCH_COUNT: i64 = 64;
const ADAPTIVE_KEYS: &[&str] = &["min", "max", "target_ci", "metric"];
/// Most levels one factor may list.
pub const MAX_LEVELS: usize = 1000;
/// Most cells (combinations of levels) one experiment may have: every cell is planned,
/// shown and stored, and 10,000 cells of even a one-second run take most of a day per round.
pub const MAX_CELLS: u64 = 10_000;
/// Most measured runs (cells x the most rounds the repetitions allow) one experiment may ask
/// for.
pub const MAX_RUNS: u64 = 100_000;

const SPECIAL_FACTORS: &[&str] = &["placement", "hipri", "polling", "irq_cpu"];

/// Validates an experiment given as text; `source` names it in messages. Reads nothing: a
/// `[workload] job` file is refused (see [`parse_with`]).
pub fn parse(source: &str, text: &str) -> Result<Experiment, ExperimentError> {
    parse_with(source, text, &job_file::NoFiles)
}

/// Validates an experiment given as text, reading a `[workload] job` file (relative to the
/// directory of `source`) and its environment through `files`.
pub fn parse_with(
    source: &str,
    text: &str,
    files: &dyn JobSource,
) -> Result<Experiment, ExperimentError> {
    let mut w = Walker {
        text,
        diags: Vec::new(),
        files,
        dir: Path::new(source).parent().unwrap_or(Path::new("")),
        engine: EngineSpec::Fio,
        engine_line: 0,
    };
    let fail = |w: Walker| ExperimentError {
        source_name: source.to_string(),
        diagnostics: w.diags,
    };
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            w.error(span, e.message().trim().to_string(), None);
            return Err(fail(w));
        }
    };
    let root = root.get_ref();

    // Policy flags first: they decide how [workload] and [factors] are checked, wherever
    // they appear in the file.
    let mut policy = OptionPolicy::default();
    for (key, value) in root.iter() {
        match key.get_ref().as_ref() {
            "allow_exec" => policy.allow_exec = w.boolean(value).unwrap_or(false),
            "allow_unknown_fio_options" => policy.allow_unknown = w.boolean(value).unwrap_or(false),
            _ => {}
        }
    }
    // The engine next: it decides which factors are options.
    let engine_value = root
        .iter()
        .find(|(k, _)| k.get_ref() == "engine")
        .map(|(_, v)| v);
    let engine_tables: Vec<_> = root
        .iter()
        .filter(|(k, _)| engine_table::TABLES.contains(&k.get_ref().as_ref()))
        .map(|(k, v)| (k.get_ref().to_string(), k.span(), v))
        .collect();
    w.engine = w.engine(engine_value, &engine_tables, policy.allow_exec);

    let mut name = None;
    let mut description = None;
    let mut seed = 0;
    let mut repetitions = Repetitions::Fixed(3);
    let mut warmup = false;
    let mut split_cpus = false;
    let mut trace = false;
    let mut trace_keep = TraceKeep::default();
    let mut target = TargetSpec {
        device: TargetDevice::Scratch,
        count: 1,
        size_bytes: DEFAULT_SCRATCH_BYTES,
        anchor_cpu: None,
        hosts: Vec::new(),
        host_specs: Vec::new(),
    };
    let mut trace_span = 0..0;
    let mut workload = Vec::new();
    let mut workload_spans: Vec<Range<usize>> = Vec::new();
    let mut job = None;
    let mut factors = Vec::new();
    let mut factors_span = 0..0;
    let mut prepare = Prepare::default();
    let mut stabilise = Stabilise::default();
    for (key, value) in root.iter() {
        match key.get_ref().as_ref() {
            "name" => name = w.nonempty_string(value, "name"),
            "description" => description = w.string(value, "description"),
            "seed" => {
                if let Some(s) = w.integer_in(value, "seed", 0, i64::MAX) {
                    seed = s as u64;
                }
            }
            "repetitions" => {
                if let Some(r) = w.repetitions(value) {
                    repetitions = r;
                }
            }
            "warmup" => warmup = w.boolean(value).unwrap_or(false),
            "split_cpus" => split_cpus = w.boolean(value).unwrap_or(false),
            "trace" => {
                (trace, trace_keep) = w.trace(value);
                trace_span = value.span();
            }
            "allow_exec" | "allow_unknown_fio_options" => {}
            "engine" | "command" | "iperf3" | "sockperf" => {}
            "target" => {
                if let Some(t) = w.target(value) {
                    target = t;
                }
            }
            "workload" => {
                (workload, workload_spans) = w.workload(value, &policy);
                job = w.job_file(value);
            }
            "factors" => {
                factors = w.factors(value, &policy);
                factors_span = key.span();
            }
            "prepare" => prepare = w.prepare(value),
            "stabilise" => stabilise = w.stabilise(value),
            other => w.unknown_key(key.span(), other, "the top level", TOP_KEYS),
        }
    }
    if name.is_none() && !root.iter().any(|(k, _)| k.get_ref() == "name") {
        w.error(
            0..0,
            "the experiment has no `name`".to_string(),
            Some("name = \"a short title\" at the top of the file".to_string()),
        );
    }
    for f in &factors {
        if let FactorKind::System(k) = &f.kind {
            if stabilise.settings.iter().any(|(s, _)| s == k) {
                w.diags.push(Diagnostic {
                    line: f.line,
                    column: 1,
                    message: format!("`{}` is a factor and is also set in [stabilise]", f.name),
                    allowed: Some("one of the two".to_string()),
                });
            }
        }
    }
    // Where each workload option came from: its key, or (job file) the `job` value and the
    // job file's line.
    let mut workload_spans: Vec<_> = workload_spans
        .into_iter()
        .map(|s| (s, String::new()))
        .collect();
    let mut text = text.to_string();
    if let Some(job) = job {
        let span = job.span.clone();
        let options = w.job_options(job, &target, &policy, &mut text);
        let at = |o: &job_file::JobOption| (span.clone(), format!("job file {}: ", o.origin));
        workload_spans.splice(0..0, options.iter().map(at));
        workload.splice(0..0, options.into_iter().map(|o| (o.name, o.value)));
    }
    w.conflicts(&workload, &workload_spans, &factors);
    w.engine_fits(&workload_spans, &factors, &target);
    w.matrix_size(factors_span, &factors, &repetitions);
    if trace && target.device_count() > 1 {
        w.error(
            trace_span.clone(),
            format!(
                "`trace = true` records one device, but [target] names {}",
                target.device_count()
            ),
            Some("one device in [target], or trace = false".to_string()),
        );
    }
    if !target.hosts.is_empty() {
        if trace {
            w.error(
                trace_span,
                "`trace = true` records this machine's device; with `hosts` fio runs elsewhere"
                    .to_string(),
                Some("trace = false".to_string()),
            );
        }
        if !prepare.is_empty() || stabilise != Stabilise::default() {
            w.error(
                0..0,
                "[prepare] and [stabilise] act on this machine; with `hosts` fio runs elsewhere"
                    .to_string(),
                Some("prepare the hosts yourself, or leave those tables out".to_string()),
            );
        }
        // Knobs, placement and interrupts are set on this machine only, unless every host is
        // controlled over SSH (`[[target.host]] ssh`): then its agent sets them there.
        let controlled = target.controlled();
        for f in &factors {
            let on_hosts = matches!(
                f.kind,
                FactorKind::QueueKnob { .. } | FactorKind::Placement | FactorKind::IrqAffinity
            );
            let here_only = !matches!(f.kind, FactorKind::Fio { .. } | FactorKind::Polling);
            if here_only && !(controlled && on_hosts) {
                w.diags.push(Diagnostic {
                    line: f.line,
                    column: 1,
                    message: format!(
                        "factor `{}` changes this machine, but with `hosts` fio runs on other \
                         machines",
                        f.name
                    ),
                    allowed: Some("fio options and hipri".to_string()),
                });
            }
        }
    }
    if !w.diags.is_empty() {
        w.diags.sort_by_key(|d| (d.line, d.column));
        return Err(fail(w));
    }
    Ok(Experiment {
        source: source.to_string(),
        text,
        name: name.unwrap_or_default(),
        description,
        seed,
        repetitions,
        warmup,
        target,
        workload,
        factors,
        policy,
        split_cpus,
        trace,
        prepare,
        stabilise,
        trace_keep,
        engine: w.engine,
    })
}

type Value<'i> = Spanned<DeValue<'i>>;

/// Factor names whose dotted keys TOML turns into nested tables.
const SYSTEM_PREFIXES: &[&str] = &["sysctl", "module", "cpu"];

/// A table's entries, with the nested tables TOML makes of dotted keys under the system
/// prefixes (`sysctl.vm.dirty_ratio = ..`) walked back into one dotted name each; every entry
/// has the span of its whole key.
fn flat_entries<'a, 'i>(table: &'a DeTable<'i>) -> Vec<(String, Range<usize>, &'a Value<'i>)> {
    fn walk<'a, 'i>(
        prefix: &str,
        start: usize,
        table: &'a DeTable<'i>,
        out: &mut Vec<(String, Range<usize>, &'a Value<'i>)>,
    ) {
        for (key, value) in table.iter() {
            let name = format!("{prefix}.{}", key.get_ref());
            match value.get_ref() {
                DeValue::Table(inner) => walk(&name, start, inner, out),
                _ => out.push((name, start.min(key.span().start)..key.span().end, value)),
            }
        }
    }
    let mut out = Vec::new();
    for (key, value) in table.iter() {
        let name = key.get_ref().to_string();
        match value.get_ref() {
            DeValue::Table(inner) if SYSTEM_PREFIXES.contains(&name.as_str()) => {
                walk(&name, key.span().start, inner, &mut out)
            }
            _ => out.push((name, key.span(), value)),
        }
    }
    out
}

fn device_is_scratch(d: &TargetDevice) -> bool {
    matches!(d, TargetDevice::Scratch)
}

struct Walker<'t> {
    text: &'t str,
    diags: Vec<Diagnostic>,
    /// Where a `[workload] job` file and its environment come from.
    files: &'t dyn JobSource,
    /// The experiment file's directory, which a relative job path starts from.
    dir: &'t Path,
    /// The file's engine, read before the factors (which may vary its options).
    engine: EngineSpec,
    /// The line of the engine's table, for problems found after it was read.
    engine_line: usize,
}

/// `[workload] job = "..."`: the job file's options (parsed, not yet checked), the span of
/// the value that names it, and the files read.
struct JobRef {
    options: Vec<job_file::JobOption>,
    span: Range<usize>,
    texts: Vec<(String, String)>,
}

/// A TOML scalar in fio's text form: booleans become 1/0, integers decimal.
fn scalar_text(v: &DeValue) -> Option<String> {
    match v {
        DeValue::String(s) => Some(s.to_string()),
        DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
        DeValue::Float(f) => Some(f.as_str().to_string()),
        DeValue::Boolean(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

fn integer(i: &toml::de::DeInteger) -> Option<i64> {
    i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok()
}

fn type_name(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Parses `2G`, `512M`, `64k`, `1GiB`, `1073741824` (binary units, as fio does).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let number: u64 = t[..digits_end].parse().ok()?;
    let unit = t[digits_end..].trim().to_ascii_lowercase();
    let shift = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return None,
    };
    number.checked_mul(1u64 << shift)
}

impl Walker<'_> {
    /// The span of line `line`'s start (1-based), for problems about a whole table.
    fn line_start(&self, line: usize) -> Range<usize> {
        let start = self
            .text
            .split_inclusive('\n')
            .take(line.saturating_sub(1))
            .map(str::len)
            .sum();
        start..start
    }

    fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }

    fn error(&mut self, span: Range<usize>, message: String, allowed: Option<String>) {
        let (line, column) = self.position(span.start);
        self.diags.push(Diagnostic {
            line,
            column,
            message,
            allowed,
        });
    }

    fn unknown_key(&mut self, span: Range<usize>, key: &str, place: &str, allowed: &[&str]) {
        let hint = crate::suggest::closest(key, allowed.iter().copied())
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        self.error(
            span,
            format!("unknown key `{key}` in {place}{hint}"),
            Some(allowed.join(", ")),
        );
    }

    fn expected(&mut self, v: &Value, what: &str, key: &str) {
        self.error(
            v.span(),
            format!("`{key}` must be {what}, not {}", type_name(v.get_ref())),
            None,
        );
    }

    fn string(&mut self, v: &Value, key: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                self.expected(v, "a string", key);
                None
            }
        }
    }

    fn nonempty_string(&mut self, v: &Value, key: &str) -> Option<String> {
        let s = self.string(v, key)?;
        if s.trim().is_empty() {
            self.error(v.span(), format!("`{key}` must not be empty"), None);
            return None;
        }
        Some(s)
    }

    fn boolean(&mut self, v: &Value) -> Option<bool> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                let (line, column) = self.position(v.span().start);
                // Report once even though policy flags are read twice.
                let message = format!("expected true or false, not {}", type_name(other));
                if !self
                    .diags
                    .iter()
                    .any(|d| d.line == line && d.column == column)
                {
                    self.diags.push(Diagnostic {
                        line,
                        column,
                        message,
                        allowed: Some("true, false".to_string()),
                    });
                }
                None
            }
        }
    }

    fn integer_in(&mut self, v: &Value, key: &str, lo: i64, hi: i64) -> Option<i64> {
        let allowed = if hi == i64::MAX {
            format!("an integer >= {lo}")
        } else {
            format!("an integer from {lo} to {hi}")
        };
        match v.get_ref() {
            DeValue::Integer(i) => match integer(i) {
                Some(n) if (lo..=hi).contains(&n) => Some(n),
                _ => {
                    self.error(v.span(), format!("`{key}` is out of range"), Some(allowed));
                    None
                }
            },
            other => {
                self.error(
                    v.span(),
                    format!("`{key}` must be an integer, not {}", type_name(other)),
                    Some(allowed),
                );
                None
            }
        }
    }

    /// `trace = true|false`, or a `[trace]` table (tracing on) with what to keep.
    fn trace(&mut self, v: &Value) -> (bool, TraceKeep) {
        let mut keep = TraceKeep::default();
        let DeValue::Table(table) = v.get_ref() else {
            return (self.boolean(v).unwrap_or(false), keep);
        };
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "keep" => {
                    let runs = match value.get_ref() {
                        DeValue::String(s) => match s.as_ref() {
                            "all" => Some(KeepRuns::All),
                            "first" => Some(KeepRuns::First),
                            "none" => Some(KeepRuns::None),
                            _ => None,
                        },
                        _ => None,
                    };
                    match runs {
                        Some(r) => keep.runs = r,
                        None => self.error(
                            value.span(),
                            "`keep` says which runs keep their trace files".to_string(),
                            Some(
                                "\"all\", \"first\" (the first run of each cell) or \"none\""
                                    .to_string(),
                            ),
                        ),
                    }
                }
                "keep_max" => {
                    let text = match value.get_ref() {
                        DeValue::String(s) => Some(s.to_string()),
                        DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
                        _ => None,
                    };
                    match text.as_deref().and_then(parse_size) {
                        Some(bytes) => keep.max_bytes = Some(bytes),
                        None => self.error(
                            value.span(),
                            "`keep_max` is not a size".to_string(),
                            Some(
                                "a size such as \"500M\" or \"2G\", or bytes: the most the \
                                 kept (compressed) traces may take"
                                    .to_string(),
                            ),
                        ),
                    }
                }
                other => self.unknown_key(key.span(), other, "[trace]", TRACE_KEYS),
            }
        }
        (true, keep)
    }

    fn repetitions(&mut self, v: &Value) -> Option<Repetitions> {
        let allowed = "an integer from 1 to 1000, or { target_ci = 0.02, min = 3, max = 30, \
                       metric = \"read_iops\" } for adaptive repetitions";
        let table = match v.get_ref() {
            DeValue::Integer(_) => {
                return self
                    .integer_in(v, "repetitions", 1, 1000)
                    .map(|n| Repetitions::Fixed(n as u32))
            }
            DeValue::Table(t) => t,
            other => {
                self.error(
                    v.span(),
                    format!("`repetitions` cannot be {}", type_name(other)),
                    Some(allowed.to_string()),
                );
                return None;
            }
        };
        let (mut min, mut max, mut target_ci, mut metric) = (3, 30, None, None);
        let mut ok = true;
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "min" => match self.integer_in(value, "min", 1, 1000) {
                    Some(n) => min = n as u32,
                    None => ok = false,
                },
                "max" => match self.integer_in(value, "max", 1, 1000) {
                    Some(n) => max = n as u32,
                    None => ok = false,
                },
                "target_ci" => {
                    let x = match value.get_ref() {
                        DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
                        DeValue::Integer(i) => integer(i).map(|n| n as f64),
                        _ => None,
                    };
                    match x.filter(|x| *x > 0.0 && *x < 1.0) {
                        Some(x) => target_ci = Some(x),
                        None => {
                            ok = false;
                            self.error(
                                value.span(),
                                "`target_ci` is the wanted relative half-width of the 95% \
                                 confidence interval"
                                    .to_string(),
                                Some("a number between 0 and 1, e.g. 0.02 for ±2%".to_string()),
                            )
                        }
                    }
                }
                "metric" => match self.nonempty_string(value, "metric") {
                    Some(m) if super::metrics::is_known(&m) || self.engine_metric(&m) => {
                        metric = Some(m)
                    }
                    Some(m) => {
                        ok = false;
                        let hint = crate::suggest::closest(
                            &m,
                            super::metrics::known().iter().map(String::as_str),
                        )
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default();
                        self.error(
                            value.span(),
                            format!("`{m}` is not a metric iolab records{hint}"),
                            Some(super::metrics::known().join(", ")),
                        );
                    }
                    None => ok = false,
                },
                other => {
                    ok = false;
                    self.unknown_key(key.span(), other, "`repetitions`", ADAPTIVE_KEYS)
                }
            }
        }
        if target_ci.is_none() && ok {
            self.error(
                v.span(),
                "adaptive `repetitions` needs `target_ci`".to_string(),
                Some(allowed.to_string()),
            );
            return None;
        }
        if min > max {
            self.error(
                v.span(),
                format!("`repetitions`: min ({min}) is larger than max ({max})"),
                None,
            );
            return None;
        }
        ok.then(|| Repetitions::Adaptive {
            min,
            max,
            target_ci: target_ci.unwrap_or_default(),
            metric,
        })
    }

    fn prepare(&mut self, v: &Value) -> Prepare {
        let mut p = Prepare::default();
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([prepare])", "prepare");
            return p;
        };
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "sync" => p.sync = self.boolean(value).unwrap_or(false),
                "drop_caches" => p.drop_caches = self.boolean(value).unwrap_or(false),
                "settle" => {
                    let text = self.string(value, "settle");
                    match text.map(|t| crate::sys::parse::duration::duration(&t)) {
                        Some(Ok(d)) => p.settle = Some(d),
                        Some(Err(e)) => self.error(value.span(), e, None),
                        None => {}
                    }
                }
                other => self.unknown_key(key.span(), other, "[prepare]", PREPARE_KEYS),
            }
        }
        p
    }

    fn stabilise(&mut self, v: &Value) -> Stabilise {
        let mut st = Stabilise::default();
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([stabilise])", "stabilise");
            return st;
        };
        let entries = flat_entries(table);
        for (name, span, value) in entries {
            if name == "preflight" {
                st.advice = self.boolean(value).unwrap_or(false);
                continue;
            }
            let knob = match SystemKnob::parse(&name) {
                Some(Ok(k)) => k,
                Some(Err(why)) => {
                    self.error(span, why, None);
                    continue;
                }
                None => {
                    let mut allowed = vec!["preflight"];
                    allowed.extend(system_knobs::NAMES);
                    self.unknown_key(span, &name, "[stabilise]", &allowed);
                    continue;
                }
            };
            match scalar_text(value.get_ref()).map(|t| knob.check(&t)) {
                Some(Ok(level)) => st.settings.push((knob, level)),
                Some(Err(allowed)) => self.error(
                    value.span(),
                    format!("not a value of `{name}`"),
                    Some(allowed),
                ),
                None => self.expected(value, "a string, integer or boolean", &name),
            }
        }
        st
    }

    fn target(&mut self, v: &Value) -> Option<TargetSpec> {
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([target])", "target");
            return None;
        };
        let mut device = TargetDevice::Scratch;
        let mut count: Option<(u32, Range<usize>)> = None;
        let mut size: Option<(u64, Range<usize>)> = None;
        let mut anchor_cpu = None;
        let mut hosts: Option<(Vec<String>, Range<usize>)> = None;
        let mut host_tables: Vec<HostSpec> = Vec::new();
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "hosts" => hosts = self.host_list(value).map(|h| (h, value.span())),
                "host" => host_tables = self.host_tables(value).unwrap_or_default(),
                "device" => {
                    device = match value.get_ref() {
                        DeValue::Array(items) => self.device_list(value, items),
                        _ => self.nonempty_string(value, "device").and_then(|d| {
                            match self.device_name(&d, value.span())? {
                                None => Some(TargetDevice::Scratch),
                                Some(n) => Some(TargetDevice::Named(vec![n])),
                            }
                        }),
                    }
                    .unwrap_or(TargetDevice::Scratch);
                }
                "count" => {
                    count = self
                        .integer_in(value, "count", 1, MAX_SCRATCH_COUNT)
                        .map(|n| (n as u32, value.span()));
                }
                "size" => {
                    let text = match value.get_ref() {
                        DeValue::String(s) => Some(s.to_string()),
                        DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
                        _ => None,
                    };
                    match text.as_deref().and_then(parse_size) {
                        Some(bytes) if bytes >= 1 << 20 => size = Some((bytes, value.span())),
                        _ => self.error(
                            value.span(),
                            "`size` is not a size of at least 1M".to_string(),
                            Some("a size such as \"512M\", \"2G\" or bytes".to_string()),
                        ),
                    }
                }
                "anchor_cpu" => {
                    // Whether the CPU is online here is checked at plan time, per machine.
                    anchor_cpu = self
                        .integer_in(value, "anchor_cpu", 0, i64::from(MAX_CPU))
                        .map(|n| n as u32);
                }
                other => self.unknown_key(key.span(), other, "[target]", TARGET_KEYS),
            }
        }
        if let (TargetDevice::Named(names), Some((_, span))) = (&device, &size) {
            self.error(
                span.clone(),
                format!(
                    "`size` sizes the default scratch device; `{}` has its own size",
                    names.join("`, `")
                ),
                None,
            );
        }
        if let (TargetDevice::Named(names), Some((_, span))) = (&device, &count) {
            self.error(
                span.clone(),
                format!(
                    "`count` is the number of default scratch devices; name each device \
                     instead (`{}` named)",
                    names.join("`, `")
                ),
                Some("device = [\"sdb\", \"sdc\"]".to_string()),
            );
        }
        // Every host, string form first; a fio server named in both forms is named twice.
        let mut host_specs: Vec<HostSpec> = Vec::new();
        for h in hosts.iter().flat_map(|(h, _)| h) {
            host_specs.push(HostSpec {
                fio: h.clone(),
                ssh: None,
                device: None,
                line: hosts.as_ref().map_or(0, |(_, s)| self.position(s.start).0),
            });
        }
        for h in host_tables {
            if host_specs.iter().any(|o| o.fio == h.fio) {
                self.diags.push(Diagnostic {
                    line: h.line,
                    column: 1,
                    message: format!("fio server `{}` is also in `hosts`", h.fio),
                    allowed: None,
                });
            } else {
                host_specs.push(h);
            }
        }
        let deviceless = host_specs.iter().find(|h| h.device.is_none());
        let scratch_span = match (&hosts, deviceless) {
            (Some((_, span)), Some(h)) if h.ssh.is_none() => Some(span.clone()),
            (_, Some(h)) => Some(self.line_start(h.line)),
            _ => None,
        };
        if let (true, Some(span)) = (device_is_scratch(&device), &scratch_span) {
            self.error(
                span.clone(),
                "`hosts` run fio on other machines, where the default scratch device does \
                 not exist: name the device they use"
                    .to_string(),
                Some("device = \"nvme0n1\" (the same name on every host)".to_string()),
            );
        }
        let count = match (device_is_scratch(&device), &count) {
            (true, Some((n, _))) => *n,
            _ => 1,
        };
        Some(TargetSpec {
            device,
            count,
            size_bytes: size.map_or(DEFAULT_SCRATCH_BYTES, |(b, _)| b),
            anchor_cpu,
            hosts: host_specs.iter().map(|h| h.fio.clone()).collect(),
            host_specs,
        })
    }

    /// `hosts`: fio server addresses as fio's `--client` takes them ("host", "host,port",
    /// "ip:1.2.3.4,8765", "ip6:::1,8765"), each once.
    fn host_list(&mut self, v: &Value) -> Option<Vec<String>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.expected(v, "a list of fio server addresses", "hosts");
            return None;
        };
        if items.is_empty() {
            self.error(
                v.span(),
                "`hosts` lists no host".to_string(),
                Some("hosts = [\"10.0.0.1\", \"10.0.0.2,8765\"]".to_string()),
            );
            return None;
        }
        let mut out: Vec<String> = Vec::new();
        for item in items {
            let Some(h) = self.nonempty_string(item, "hosts") else {
                continue;
            };
            let h = h.trim().to_string();
            if !h
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".:,-_[]".contains(c))
            {
                self.error(
                    item.span(),
                    format!("`{h}` is not a fio server address"),
                    Some("\"host\", \"host,port\", \"ip:1.2.3.4,8765\"".to_string()),
                );
            } else if out.contains(&h) {
                self.error(item.span(), format!("host `{h}` is listed twice"), None);
            } else {
                out.push(h);
            }
        }
        // The valid ones still count, so the checks that depend on `hosts` report too.
        (!out.is_empty()).then_some(out)
    }

    /// A `device` string checked as a block device name: `Some(None)` for "default",
    /// `None` (reported) when it is not a name.
    fn device_name(&mut self, d: &str, span: Range<usize>) -> Option<Option<String>> {
        let name = d.trim().trim_start_matches("/dev/");
        if name == "default" {
            return Some(None);
        }
        if name.split('/').any(|p| p.is_empty() || p == "..")
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c))
        {
            self.error(
                span,
                format!("`{d}` is not a block device name"),
                Some(
                    "\"default\" (a scratch loop device on /dev/shm) or a device name such \
                     as \"nvme0n1\" or \"/dev/sdb\""
                        .to_string(),
                ),
            );
            return None;
        }
        Some(Some(name.to_string()))
    }

    /// `device = ["sdb", "sdc"]`: named devices only, each once.
    fn device_list(&mut self, v: &Value, items: &[Value]) -> Option<TargetDevice> {
        if items.is_empty() {
            self.error(
                v.span(),
                "`device` lists no device".to_string(),
                Some("device = [\"sdb\", \"sdc\"], or \"default\"".to_string()),
            );
            return None;
        }
        let mut names: Vec<String> = Vec::new();
        let mut ok = true;
        for item in items {
            let Some(d) = self.nonempty_string(item, "device") else {
                ok = false;
                continue;
            };
            match self.device_name(&d, item.span()) {
                None => ok = false,
                Some(None) => {
                    ok = false;
                    self.error(
                        item.span(),
                        "\"default\" cannot be mixed with named devices".to_string(),
                        Some(
                            "device = \"default\" with `count = N` for several scratch \
                             devices, or only named devices"
                                .to_string(),
                        ),
                    );
                }
                Some(Some(n)) if names.contains(&n) => {
                    ok = false;
                    self.error(item.span(), format!("`{n}` is listed twice"), None);
                }
                Some(Some(n)) => names.push(n),
            }
        }
        ok.then_some(TargetDevice::Named(names))
    }

    fn fio_option(&mut self, span: Range<usize>, name: &str, value: &str, policy: &OptionPolicy) {
        if let Err(refusal) = options::check_option(name, value, policy) {
            let allowed = match &refusal {
                options::Refusal::Unknown { .. } => Some(
                    "options listed by `fio --cmdhelp=all`, or set allow_unknown_fio_options \
                     = true for a newer fio"
                        .to_string(),
                ),
                _ => None,
            };
            self.error(span, refusal.to_string(), allowed);
        }
    }

    fn workload(
        &mut self,
        v: &Value,
        policy: &OptionPolicy,
    ) -> (Vec<(String, String)>, Vec<Range<usize>>) {
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([workload])", "workload");
            return Default::default();
        };
        let mut opts = Vec::new();
        let mut spans = Vec::new();
        for (key, value) in table.iter() {
            let name = key.get_ref().to_string();
            if name == "job" {
                continue; // a job file (`job_file`), not a fio option
            }
            let Some(text) = scalar_text(value.get_ref()) else {
                let hint = if matches!(value.get_ref(), DeValue::Array(_)) {
                    format!("; to vary it, list its levels under [factors]: {name} = [...]")
                } else {
                    String::new()
                };
                self.error(
                    value.span(),
                    format!(
                        "fio option `{name}` takes one value, not {}{hint}",
                        type_name(value.get_ref())
                    ),
                    Some("a string, integer, float or boolean".to_string()),
                );
                continue;
            };
            self.fio_option(key.span(), &name, &text, policy);
            opts.push((name, text));
            spans.push(key.span());
        }
        (opts, spans)
    }

    /// Reads the job file `[workload] job = "..."` names; problems are reported at that line,
    /// each naming the job file's own line.
    fn job_file(&mut self, workload: &Value) -> Option<JobRef> {
        let DeValue::Table(table) = workload.get_ref() else {
            return None;
        };
        let v = table.get("job")?;
        let name = self.nonempty_string(v, "job")?;
        let path = self.dir.join(&name);
        let parsed = job_file::parse(&path, self.files)
            .and_then(|f| Ok((job_file::workload(&f.sections)?, f.texts)));
        match parsed {
            Ok((options, texts)) => Some(JobRef {
                options,
                span: v.span(),
                texts,
            }),
            Err(problems) => {
                for p in problems {
                    self.error(v.span(), format!("job file {p}"), None);
                }
                None
            }
        }
    }

    /// Checks a job file's options against the target and the allow-list; keeps the job
    /// file's text with the experiment's (as TOML comments), so the store records what ran.
    fn job_options(
        &mut self,
        job: JobRef,
        target: &TargetSpec,
        policy: &OptionPolicy,
        text: &mut String,
    ) -> Vec<job_file::JobOption> {
        let targets: Vec<String> = match &target.device {
            TargetDevice::Named(names) => names.iter().map(|n| format!("/dev/{n}")).collect(),
            TargetDevice::Scratch => Vec::new(),
        };
        let (kept, problems) = job_file::check(&job.options, &targets, policy);
        for p in problems {
            self.error(job.span.clone(), format!("job file {p}"), None);
        }
        for (path, body) in &job.texts {
            text.push_str(&format!("\n# job file {path}, as read:\n"));
            for line in body.lines() {
                text.push_str(format!("#   {line}").trim_end());
                text.push('\n');
            }
        }
        kept
    }

    fn factors(&mut self, v: &Value, policy: &OptionPolicy) -> Vec<Factor> {
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([factors])", "factors");
            return Vec::new();
        };
        let mut factors: Vec<Factor> = Vec::new();
        let entries = flat_entries(table);
        for (name, key_span, value) in entries {
            let Some(kind) = self.factor_kind(key_span.clone(), &name, policy) else {
                continue;
            };
            if kind == FactorKind::Polling && factors.iter().any(|f| f.kind == kind) {
                self.error(
                    key_span.clone(),
                    "`hipri` and `polling` are the same factor; keep one".to_string(),
                    None,
                );
                continue;
            }
            let DeValue::Array(items) = value.get_ref() else {
                self.error(
                    value.span(),
                    format!("the levels of `{name}` must be a list, e.g. {name} = [a, b]"),
                    None,
                );
                continue;
            };
            if items.is_empty() {
                self.error(
                    value.span(),
                    format!("`{name}` has no levels; give at least one"),
                    None,
                );
                continue;
            }
            if items.len() > MAX_LEVELS {
                self.error(
                    value.span(),
                    format!(
                        "`{name}` has {} levels, more than the limit of {MAX_LEVELS} per factor",
                        items.len()
                    ),
                    Some(format!("at most {MAX_LEVELS} levels per factor")),
                );
                continue;
            }
            let mut levels: Vec<Level> = Vec::new();
            for item in items.iter() {
                let Some(level) = self.level(item, &name, &kind, policy) else {
                    continue;
                };
                if levels.iter().any(|l| l.label == level.label) {
                    self.error(
                        item.span(),
                        format!("level `{}` of `{name}` is listed twice", level.label),
                        None,
                    );
                    continue;
                }
                levels.push(level);
            }
            if levels.len() == items.len() {
                factors.push(Factor {
                    name,
                    kind,
                    levels,
                    line: self.position(key_span.clone().start).0,
                });
            }
        }
        // Placements are resolved against the CPUs online when the experiment starts.
        let placed = factors
            .iter()
            .any(|f| matches!(f.kind, FactorKind::Placement | FactorKind::IrqAffinity));
        for f in &factors {
            if matches!(&f.kind, FactorKind::System(k) if k.changes_cpus()) && placed {
                self.diags.push(Diagnostic {
                    line: f.line,
                    column: 1,
                    message: format!(
                        "`{}` takes CPUs offline, but placement and irq_cpu are resolved \
                         against the CPUs online at the start",
                        f.name
                    ),
                    allowed: Some("vary it in an experiment of its own".to_string()),
                });
            }
        }
        factors
    }

    fn factor_kind(
        &mut self,
        span: Range<usize>,
        name: &str,
        policy: &OptionPolicy,
    ) -> Option<FactorKind> {
        if let Some(e) = self.engine.program() {
            if e.is_option(name) {
                return Some(FactorKind::Engine {
                    option: name.to_string(),
                });
            }
        }
        match name {
            "placement" => return Some(FactorKind::Placement),
            "hipri" | "polling" => return Some(FactorKind::Polling),
            "irq_cpu" => return Some(FactorKind::IrqAffinity),
            _ => {}
        }
        match SystemKnob::parse(name) {
            Some(Ok(knob)) => return Some(FactorKind::System(knob)),
            Some(Err(why)) => {
                self.error(span, why, Some(system_knobs::NAMES.join(", ")));
                return None;
            }
            None => {}
        }
        let attribute = name.strip_prefix("queue/").unwrap_or(name);
        if let Some(knob) = queue_knobs::find(attribute) {
            return Some(FactorKind::QueueKnob {
                attribute: knob.attribute.to_string(),
            });
        }
        if name.starts_with("queue/") {
            if queue_knobs::is_valid_attribute_path(attribute) {
                return Some(FactorKind::QueueKnob {
                    attribute: attribute.to_string(),
                });
            }
            self.error(
                span,
                format!("`{name}` is not a queue attribute path"),
                Some("queue/NAME or queue/iosched/NAME in lower case".to_string()),
            );
            return None;
        }
        if options::is_fio_option(name) || (policy.allow_unknown && !name.is_empty()) {
            return Some(FactorKind::Fio {
                option: name.to_string(),
            });
        }
        let knobs = queue_knobs::names();
        let hint = crate::suggest::closest(name, SPECIAL_FACTORS.iter().chain(&knobs).copied())
            .or_else(|| options::suggest(name))
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        self.error(
            span,
            format!("unknown factor `{name}`{hint}"),
            Some(format!(
                "a queue knob ({}), queue/ATTRIBUTE, placement, hipri, irq_cpu, a system \
                 control ({}), or a fio option (bs, iodepth, numjobs, rw, ...)",
                knobs.join(", "),
                system_knobs::NAMES.join(", ")
            )),
        );
        None
    }

    fn level(
        &mut self,
        item: &Value,
        factor: &str,
        kind: &FactorKind,
        policy: &OptionPolicy,
    ) -> Option<Level> {
        let v = item.get_ref();
        match kind {
            FactorKind::Engine { option } => {
                let Some(text) = engine_table::option_text(v) else {
                    self.expected(item, "a string, number or boolean", factor);
                    return None;
                };
                if let Some(Err(e)) = self.engine.program().map(|e| e.check_option(option, &text)) {
                    self.error(item.span(), e, None);
                    return None;
                }
                Some(Level {
                    label: text.clone(),
                    value: LevelValue::Fio(text),
                })
            }
            FactorKind::Polling => match v {
                DeValue::Boolean(b) => Some(Level {
                    label: b.to_string(),
                    value: LevelValue::Polling(*b),
                }),
                other => {
                    self.error(
                        item.span(),
                        format!(
                            "`{factor}` levels are true or false, not {}",
                            type_name(other)
                        ),
                        Some("true, false".to_string()),
                    );
                    None
                }
            },
            FactorKind::Placement | FactorKind::IrqAffinity => {
                let placement = *kind == FactorKind::Placement;
                let allowed = if placement {
                    PLACEMENT_ALLOWED
                } else {
                    IRQ_ALLOWED
                };
                let text = match v {
                    DeValue::String(s) => Some(s.to_string()),
                    DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
                    DeValue::Array(cpus) => {
                        let nums: Option<Vec<String>> = cpus
                            .iter()
                            .map(|c| match c.get_ref() {
                                DeValue::Integer(i) => {
                                    integer(i).filter(|n| *n >= 0).map(|n| n.to_string())
                                }
                                _ => None,
                            })
                            .collect();
                        nums.filter(|n| !n.is_empty()).map(|n| n.join(","))
                    }
                    _ => None,
                };
                let parsed = match text {
                    Some(t) if placement => Pinning::parse(&t).map(LevelValue::Placement),
                    Some(t) => IrqPlacement::parse(&t).map(LevelValue::Irq),
                    None => Err(format!("{} is not a placement", type_name(v))),
                };
                match parsed {
                    Ok(value) => {
                        let label = match &value {
                            LevelValue::Placement(p) => p.to_string(),
                            LevelValue::Irq(p) => p.to_string(),
                            _ => unreachable!("placement levels only"),
                        };
                        Some(Level { label, value })
                    }
                    Err(e) => {
                        self.error(item.span(), e, Some(allowed.to_string()));
                        None
                    }
                }
            }
            FactorKind::System(knob) => {
                let text = match v {
                    DeValue::String(s) => Some(s.to_string()),
                    DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
                    DeValue::Boolean(b) => Some(b.to_string()),
                    _ => None,
                };
                match text.map(|t| knob.check(&t)) {
                    Some(Ok(value)) => Some(Level {
                        label: value.clone(),
                        value: LevelValue::Knob(value),
                    }),
                    Some(Err(allowed)) => {
                        self.error(
                            item.span(),
                            format!("not a value of `{factor}`"),
                            Some(allowed),
                        );
                        None
                    }
                    None => {
                        self.error(
                            item.span(),
                            format!(
                                "`{factor}` levels are strings, integers or booleans, not {}",
                                type_name(v)
                            ),
                            None,
                        );
                        None
                    }
                }
            }
            FactorKind::QueueKnob { attribute } => {
                let text = match v {
                    DeValue::String(s) => Some(s.to_string()),
                    DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
                    _ => None,
                };
                let Some(text) = text.filter(|t| !t.contains(['\n', '\r', '\0'])) else {
                    self.error(
                        item.span(),
                        format!(
                            "`{factor}` levels are strings or integers, not {}",
                            type_name(v)
                        ),
                        None,
                    );
                    return None;
                };
                match queue_knobs::find(attribute) {
                    Some(knob) => match knob.check(&text) {
                        Ok(value) => Some(Level {
                            label: value.clone(),
                            value: LevelValue::Knob(value),
                        }),
                        Err(allowed) => {
                            self.error(
                                item.span(),
                                format!("`{text}` is not a value of `{factor}`"),
                                Some(allowed),
                            );
                            None
                        }
                    },
                    None => Some(Level {
                        label: text.clone(),
                        value: LevelValue::Knob(text),
                    }),
                }
            }
            FactorKind::Fio { option } => {
                let Some(text) = scalar_text(v) else {
                    self.error(
                        item.span(),
                        format!(
                            "a level of fio option `{option}` is one value, not {}",
                            type_name(v)
                        ),
                        Some("a string, integer, float or boolean".to_string()),
                    );
                    return None;
                };
                let before = self.diags.len();
                self.fio_option(item.span(), option, &text, policy);
                (self.diags.len() == before).then(|| Level {
                    label: text.clone(),
                    value: LevelValue::Fio(text),
                })
            }
        }
    }

    /// Refuses a matrix too large to plan, before anything is allocated per cell: the
    /// product of the level counts is computed with checked multiplication.
    fn matrix_size(&mut self, span: Range<usize>, factors: &[Factor], reps: &Repetitions) {
        let cells = factors
            .iter()
            .try_fold(1u64, |n, f| n.checked_mul(f.levels.len() as u64));
        let counts = factors
            .iter()
            .map(|f| f.levels.len().to_string())
            .collect::<Vec<_>>()
            .join(" x ");
        let Some(cells) = cells.filter(|c| *c <= MAX_CELLS) else {
            let n = cells.map_or("more than 2^64".to_string(), |c| c.to_string());
            self.error(
                span,
                format!("the factors' levels ({counts}) make {n} cells, more than the limit of {MAX_CELLS}"),
                Some(format!("at most {MAX_CELLS} cells: fewer factors or fewer levels")),
            );
            return;
        };
        let rounds = u64::from(reps.max_rounds());
        let runs = cells.saturating_mul(rounds);
        if runs > MAX_RUNS {
            self.error(
                span,
                format!(
                    "{cells} cells ({counts}) x up to {rounds} repetitions make {runs} runs, more \
                     than the limit of {MAX_RUNS}"
                ),
                Some(format!(
                    "at most {MAX_RUNS} runs: fewer cells or fewer repetitions"
                )),
            );
        }
    }

    /// Options in [workload] that a factor sets itself.
    fn conflicts(
        &mut self,
        workload: &[(String, String)],
        spans: &[(Range<usize>, String)],
        factors: &[Factor],
    ) {
        let has = |k: &FactorKind| factors.iter().any(|f| &f.kind == k);
        for ((name, value), (span, at)) in workload.iter().zip(spans) {
            let canon = options::canonical(name);
            if has(&FactorKind::Placement) && PLACEMENT_OPTIONS.contains(&canon) {
                self.error(
                    span.clone(),
                    format!(
                        "{at}`{name}` conflicts with the `placement` factor, which pins fio \
                         itself"
                    ),
                    Some("remove it from [workload] or drop the placement factor".to_string()),
                );
            }
            if has(&FactorKind::Polling) && canon == "hipri" {
                self.error(
                    span.clone(),
                    format!("{at}`hipri` in [workload] conflicts with the `hipri` factor"),
                    None,
                );
            }
            if has(&FactorKind::Polling)
                && canon == "ioengine"
                && !POLLING_ENGINES.contains(&value.trim())
            {
                self.error(
                    span.clone(),
                    format!("{at}ioengine={value} cannot poll, but `hipri` is a factor"),
                    Some(POLLING_ENGINES.join(", ")),
                );
            }
        }
        if has(&FactorKind::Polling) {
            for f in factors {
                if let FactorKind::Fio { option } = &f.kind {
                    if options::canonical(option) != "ioengine" {
                        continue;
                    }
                    for level in &f.levels {
                        if !POLLING_ENGINES.contains(&level.label.trim()) {
                            self.diags.push(Diagnostic {
                                line: f.line,
                                column: 1,
                                message: format!(
                                    "ioengine level `{}` cannot poll, but `hipri` is a factor",
                                    level.label
                                ),
                                allowed: Some(POLLING_ENGINES.join(", ")),
                            });
                        }
                    }
                }
            }
        }
        if has(&FactorKind::Placement) {
            for f in factors {
                if let FactorKind::Fio { option } = &f.kind {
                    if PLACEMENT_OPTIONS.contains(&options::canonical(option)) {
                        self.diags.push(Diagnostic {
                            line: f.line,
                            column: 1,
                            message: format!(
                                "factor `{option}` conflicts with the `placement` factor"
                            ),
                            allowed: None,
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "rq_affinity vs placement"
seed = 42
repetitions = 5
warmup = true
[target]
device = "default"
size = "2G"
[workload]
rw = "randread"
bs = "4k"
iodepth = 32
ioengine = "io_uring"
direct = 1
runtime = "10s"
time_based = true
[factors]
rq_affinity = [0, 1, 2]
placement = ["on", "near", "far", [0, 1]]
hipri = [false, true]
bs = ["4k", "64k", "1m"]
irq_cpu = ["on-node", "far"]
scheduler = ["none", "mq-deadline"]
"queue/iosched/fifo_batch" = [8, 16]
"#;

    fn errors(text: &str) -> Vec<String> {
        parse("x.toml", text)
            .unwrap_err()
            .to_string()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_full_file_parses() {
        let e = parse("x.toml", GOOD).unwrap();
        assert_eq!(e.name, "rq_affinity vs placement");
        assert_eq!(e.seed, 42);
        assert_eq!(e.repetitions, Repetitions::Fixed(5));
        assert!(e.warmup);
        assert_eq!(e.target.size_bytes, 2 << 30);
        assert_eq!(e.target.device, TargetDevice::Scratch);
        assert_eq!(e.workload[0], ("rw".to_string(), "randread".to_string()));
        assert_eq!(e.workload[6], ("time_based".to_string(), "1".to_string()));
        let names: Vec<&str> = e.factors.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "rq_affinity",
                "placement",
                "hipri",
                "bs",
                "irq_cpu",
                "scheduler",
                "queue/iosched/fifo_batch"
            ]
        );
        let placement = e.factor("placement").unwrap();
        assert_eq!(placement.levels[3].label, "0-1");
        assert_eq!(
            placement.levels[3].value,
            LevelValue::Placement(Pinning::Pinned(crate::placement::Placement::Cpus(vec![
                0, 1
            ])))
        );
        assert_eq!(
            e.factor("queue/iosched/fifo_batch").unwrap().kind,
            FactorKind::QueueKnob {
                attribute: "iosched/fifo_batch".to_string()
            }
        );
        assert_eq!(e.factor("rq_affinity").unwrap().line, 18);
        assert!(e.workload_writes().is_none());
    }

    #[test]
    fn defaults() {
        let e = parse("x.toml", "name = \"n\"").unwrap();
        assert_eq!(e.repetitions, Repetitions::Fixed(3));
        assert_eq!(e.target.size_bytes, DEFAULT_SCRATCH_BYTES);
        assert!(e.factors.is_empty() && e.workload.is_empty());
        assert_eq!(e.seed, 0);
    }

    #[test]
    fn adaptive_repetitions() {
        let e = parse(
            "x.toml",
            "name = \"n\"\nrepetitions = { target_ci = 0.02, max = 12 }",
        )
        .unwrap();
        assert_eq!(
            e.repetitions,
            Repetitions::Adaptive {
                min: 3,
                max: 12,
                target_ci: 0.02,
                metric: None
            }
        );
        let errs = errors("name = \"n\"\nrepetitions = { max = 12 }");
        assert!(errs[0].starts_with("x.toml:2:15: adaptive `repetitions` needs `target_ci`"));
        let errs = errors("name = \"n\"\nrepetitions = { target_ci = 2.0 }");
        assert!(errs[0].contains("confidence interval"), "{errs:?}");
        let errs = errors("name = \"n\"\nrepetitions = { target_ci = 0.1, min = 5, max = 4 }");
        assert!(
            errs[0].contains("min (5) is larger than max (4)"),
            "{errs:?}"
        );
        let errs = errors("name = \"n\"\nrepetitions = { target_ci = 0.1, metric = \"read_iop\" }");
        assert!(
            errs[0]
                .contains("`read_iop` is not a metric iolab records (did you mean `read_iops`?)"),
            "{errs:?}"
        );
        let errs = errors("name = \"n\"\nrepetitions = 0");
        assert!(errs[0].starts_with("x.toml:2:15: `repetitions` is out of range"));
        assert_eq!(errs[1], "    allowed: an integer from 1 to 1000");
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let errs = errors("name = \"n\"\nseed = = 3\n");
        assert!(errs[0].starts_with("x.toml:2:"), "{errs:?}");
    }

    #[test]
    fn unknown_keys_everywhere_with_suggestions() {
        let errs = errors(
            "name = \"n\"\nrepetition = 3\n[target]\ndevise = \"default\"\n[factors]\nrq_afinity = [1]\n",
        );
        assert_eq!(
            errs[0],
            "x.toml:2:1: unknown key `repetition` in the top level (did you mean `repetitions`?)"
        );
        assert!(errs[1].contains("allowed: name, description, seed"));
        assert!(errs[2]
            .starts_with("x.toml:4:1: unknown key `devise` in [target] (did you mean `device`?)"));
        assert!(errs[4]
            .starts_with("x.toml:6:1: unknown factor `rq_afinity` (did you mean `rq_affinity`?)"));
        assert!(errs[5].contains("scheduler, rq_affinity, nr_requests"));
    }

    #[test]
    fn impossible_levels_are_refused_with_the_allowed_values() {
        let errs = errors(
            "name = \"n\"\n[factors]\nrq_affinity = [0, 3]\nplacement = [\"on\", \"nearby\"]\n\
             scheduler = [\"cfq\"]\nhipri = [\"yes\"]\nbs = []\nnomerges = 1\n",
        );
        let text = errs.join("\n");
        assert!(
            text.contains("x.toml:3:19: `3` is not a value of `rq_affinity`"),
            "{text}"
        );
        assert!(text.contains("takes \"0\", \"1\", \"2\""), "{text}");
        assert!(
            text.contains("x.toml:4:20: `nearby` is not a placement"),
            "{text}"
        );
        assert!(text.contains("\"on\", \"near\", \"far\""), "{text}");
        assert!(
            text.contains("x.toml:5:14: `cfq` is not a value of `scheduler`"),
            "{text}"
        );
        assert!(
            text.contains("\"none\", \"mq-deadline\", \"kyber\", \"bfq\""),
            "{text}"
        );
        assert!(
            text.contains("x.toml:6:10: `hipri` levels are true or false"),
            "{text}"
        );
        assert!(text.contains("x.toml:7:6: `bs` has no levels"), "{text}");
        assert!(
            text.contains("x.toml:8:12: the levels of `nomerges` must be a list"),
            "{text}"
        );
    }

    #[test]
    fn duplicate_levels_and_bad_attribute_paths() {
        let text = errors("name = \"n\"\n[factors]\nbs = [\"4k\", \"4k\"]\n\"queue/../x\" = [1]\n")
            .join("\n");
        assert!(
            text.contains("x.toml:3:13: level `4k` of `bs` is listed twice"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:1: `queue/../x` is not a queue attribute path"),
            "{text}"
        );
    }

    #[test]
    fn dangerous_fio_options_are_refused_unless_allowed() {
        let file = "name = \"n\"\n[workload]\nexec_prerun = \"curl x | sh\"\n\
                    [factors]\nioengine = [\"io_uring\", \"external:/tmp/e.so\"]\n";
        let text = errors(file).join("\n");
        assert!(
            text.contains("x.toml:3:1: `exec_prerun` makes fio run a shell command"),
            "{text}"
        );
        assert!(
            text.contains(
                "x.toml:5:25: `ioengine=external:/tmp/e.so` makes fio load a shared object"
            ),
            "{text}"
        );
        let allowed = format!("allow_exec = true\n{file}");
        let e = parse("x.toml", &allowed).unwrap();
        assert!(e.policy.allow_exec);
        let text =
            errors("name = \"n\"\n[workload]\nfilename = \"/dev/vda\"\nioscheduler = \"none\"\n")
                .join("\n");
        assert!(
            text.contains("x.toml:3:1: `filename` is set by iolab"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:1: `ioscheduler` switches"),
            "{text}"
        );
    }

    #[test]
    fn unknown_fio_options_and_array_values() {
        let text = errors("name = \"n\"\n[workload]\niodeph = 4\nbs = [\"4k\"]\n").join("\n");
        assert!(
            text.contains(
                "x.toml:3:1: `iodeph` is not an option of fio 3.33 (did you mean `iodepth`?)"
            ),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:6: fio option `bs` takes one value, not an array; to vary it"),
            "{text}"
        );
        let e = parse(
            "x.toml",
            "name = \"n\"\nallow_unknown_fio_options = true\n[workload]\nnew_option = 1\n",
        )
        .unwrap();
        assert_eq!(e.workload, [("new_option".to_string(), "1".to_string())]);
    }

    #[test]
    fn conflicts_between_workload_and_factors() {
        let text = errors(
            "name = \"n\"\n[workload]\ncpus_allowed = \"0\"\nioengine = \"libaio\"\nhipri = 1\n\
             [factors]\nplacement = [\"on\"]\nhipri = [true]\n",
        )
        .join("\n");
        assert!(
            text.contains("x.toml:3:1: `cpus_allowed` conflicts with the `placement` factor"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:1: ioengine=libaio cannot poll"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:5:1: `hipri` in [workload] conflicts"),
            "{text}"
        );
    }

    /// A job file in a fake directory beside the experiment `/e/x.toml`.
    fn with_job(text: &str, job: &str) -> Result<Experiment, ExperimentError> {
        let files = crate::workload::job_file::fake::Fake::default().file("/e/j.fio", job);
        parse_with("/e/x.toml", text, &files)
    }

    #[test]
    fn a_job_file_is_the_base_workload_under_inline_options_and_factors() {
        let e = with_job(
            "name = \"n\"\n[target]\ndevice = \"sdb\"\n[workload]\nbs = \"8k\"\n\
             job = \"j.fio\"\n[factors]\niodepth = [1, 4]\n",
            "; mine\n[global]\nioengine=psync\nfilename=/dev/sdb\n[r]\nrw=randwrite\n\
             bs=4k\ntime_based\n",
        )
        .unwrap();
        let names: Vec<(&str, &str)> = e
            .workload
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        // The job file first (its `filename` dropped: iolab sets the target), then [workload].
        assert_eq!(
            names,
            [
                ("ioengine", "psync"),
                ("rw", "randwrite"),
                ("bs", "4k"),
                ("time_based", ""),
                ("bs", "8k")
            ]
        );
        // Writes are judged from the job file's options as from inline ones.
        assert!(e.workload_writes().unwrap().contains("randwrite"));
        // The job file's text is kept with the experiment's, as comments TOML still reads.
        assert!(
            e.text
                .contains("# job file /e/j.fio, as read:\n#   ; mine\n"),
            "{}",
            e.text
        );
        assert!(e.text.parse::<toml::Table>().is_ok());
    }

    #[test]
    fn job_file_problems_name_both_files_lines() {
        let toml = "name = \"n\"\n[workload]\njob = \"j.fio\"\n[factors]\nplacement = [\"on\"]\n";
        let text = with_job(
            toml,
            "[j]\nexec_prerun=touch /tmp/x\nfilename=/etc/passwd\ncpus_allowed=0\nbs=huge\n",
        )
        .unwrap_err()
        .to_string();
        for expect in [
            "/e/x.toml:3:7: job file /e/j.fio:2: `exec_prerun` makes fio run",
            "/e/x.toml:3:7: job file /e/j.fio:3: `filename=/etc/passwd` names /etc/passwd \
             outside the experiment's target",
            "/e/x.toml:3:7: job file /e/j.fio:5: `bs` = \"huge\"",
            "/e/x.toml:3:7: job file /e/j.fio:4: `cpus_allowed` conflicts with the `placement`",
        ] {
            assert!(text.contains(expect), "{expect}\n{text}");
        }
        let text = with_job(toml, "[j]\ninclude ../x.fio\n")
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("/e/x.toml:3:7: job file /e/j.fio:2: `include ../x.fio` reaches"),
            "{text}"
        );
        // Given as text, an experiment reads no file.
        let text = errors(toml).join("\n");
        assert!(
            text.contains("x.toml:3:7: job file j.fio: cannot read"),
            "{text}"
        );
        assert!(text.contains("iolab run FILE"), "{text}");
    }

    #[test]
    fn several_targets_named_or_counted() {
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = [\"sdb\", \"/dev/sdc\"]\n",
        )
        .unwrap();
        assert_eq!(
            e.target.device,
            TargetDevice::Named(vec!["sdb".to_string(), "sdc".to_string()])
        );
        assert_eq!(e.target.device_count(), 2);
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"default\"\ncount = 3\n",
        )
        .unwrap();
        assert_eq!(
            (e.target.device.clone(), e.target.count),
            (TargetDevice::Scratch, 3)
        );
        assert_eq!(e.target.device_count(), 3);
        let text =
            errors("name = \"n\"\n[target]\ndevice = [\"sdb\", \"default\", \"sdb\", \"../x\"]\n")
                .join("\n");
        assert!(
            text.contains("x.toml:3:18: \"default\" cannot be mixed with named devices"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:3:29: `sdb` is listed twice"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:3:36: `../x` is not a block device name"),
            "{text}"
        );
        let text = errors("name = \"n\"\n[target]\ndevice = []\ncount = 0\n").join("\n");
        assert!(
            text.contains("x.toml:3:10: `device` lists no device"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:9: `count` is out of range"),
            "{text}"
        );
        let text =
            errors("name = \"n\"\n[target]\ndevice = [\"sdb\", \"sdc\"]\ncount = 2\n").join("\n");
        assert!(
            text.contains("x.toml:4:9: `count` is the number of default scratch devices"),
            "{text}"
        );
        let text = errors("name = \"n\"\ntrace = true\n[target]\ncount = 2\n").join("\n");
        assert!(
            text.contains("x.toml:2:9: `trace = true` records one device, but [target] names 2"),
            "{text}"
        );
    }

    #[test]
    fn target_checks() {
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"/dev/nvme0n1\"\n",
        )
        .unwrap();
        assert_eq!(
            e.target.device,
            TargetDevice::Named(vec!["nvme0n1".to_string()])
        );
        let text =
            errors("name = \"n\"\n[target]\ndevice = \"nvme0n1\"\nsize = \"1G\"\n").join("\n");
        assert!(
            text.contains("x.toml:4:8: `size` sizes the default scratch device"),
            "{text}"
        );
        let text =
            errors("name = \"n\"\n[target]\ndevice = \"../etc\"\nsize = \"lots\"\n").join("\n");
        assert!(
            text.contains("x.toml:3:10: `../etc` is not a block device name"),
            "{text}"
        );
        assert!(text.contains("x.toml:4:8: `size` is not a size"), "{text}");
    }

    #[test]
    fn hosts_run_the_job_elsewhere_and_change_nothing_here() {
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"nvme0n1\"\n\
             hosts = [\"10.0.0.1\", \"ip:10.0.0.2,8765\"]\n[factors]\nbs = [\"4k\", \"8k\"]\n\
             hipri = [false, true]\n[workload]\nioengine = \"io_uring\"\n",
        )
        .unwrap();
        assert_eq!(e.target.hosts, vec!["10.0.0.1", "ip:10.0.0.2,8765"]);
        let text = errors(
            "name = \"n\"\ntrace = true\n[target]\nhosts = [\"a\", \"a\", \"b c\"]\n\
             [factors]\nrq_affinity = [1, 2]\nplacement = [\"on\", \"far\"]\n",
        )
        .join("\n");
        assert!(
            text.contains("x.toml:2:9: `trace = true` records this machine's device"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:15: host `a` is listed twice"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:6:1: factor `rq_affinity` changes this machine"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:7:1: factor `placement` changes this machine"),
            "{text}"
        );
        let text = errors("name = \"n\"\n[target]\nhosts = [\"h;rm\", \"ok\"]\n").join("\n");
        assert!(
            text.contains("`h;rm` is not a fio server address"),
            "{text}"
        );
        assert!(
            text.contains("the default scratch device does not exist"),
            "{text}"
        );
        let text = errors("name = \"n\"\n[target]\ndevice = \"sdb\"\nhosts = []\n").join("\n");
        assert!(text.contains("x.toml:4:9: `hosts` lists no host"), "{text}");
    }

    #[test]
    fn anchor_cpu() {
        let e = parse("x.toml", "name = \"n\"\n[target]\nanchor_cpu = 1\n").unwrap();
        assert_eq!(e.target.anchor_cpu, Some(1));
        let e = parse("x.toml", "name = \"n\"\n").unwrap();
        assert_eq!(e.target.anchor_cpu, None);
        let text = errors("name = \"n\"\n[target]\nanchor_cpu = -1\n").join("\n");
        assert!(
            text.contains("x.toml:3:14: `anchor_cpu` is out of range"),
            "{text}"
        );
        assert!(text.contains("an integer from 0 to 8191"), "{text}");
        let text = errors("name = \"n\"\n[target]\nanchor_cpu = \"0\"\n").join("\n");
        assert!(
            text.contains("x.toml:3:14: `anchor_cpu` must be an integer"),
            "{text}"
        );
    }

    #[test]
    fn missing_name_and_wrong_types() {
        let text = errors("seed = -1\nwarmup = \"yes\"\n").join("\n");
        assert!(
            text.contains("x.toml:1:1: the experiment has no `name`"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:1:8: `seed` is out of range"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:2:10: expected true or false"),
            "{text}"
        );
    }

    #[test]
    fn trace_is_a_top_level_flag() {
        assert!(!parse("x.toml", GOOD).unwrap().trace);
        assert!(
            parse("x.toml", "name = \"n\"\ntrace = true\n")
                .unwrap()
                .trace
        );
        let text = errors("name = \"n\"\ntrace = 1\n").join("\n");
        assert!(
            text.contains("x.toml:2:9: expected true or false, not an integer"),
            "{text}"
        );
        let text = errors("name = \"n\"\ntraces = true\n").join("\n");
        assert!(text.contains("(did you mean `trace`?)"), "{text}");
    }

    #[test]
    fn a_trace_table_turns_tracing_on_and_caps_what_is_kept() {
        let e = parse("x.toml", "name = \"n\"\ntrace = true\n").unwrap();
        assert_eq!(e.trace_keep, TraceKeep::default());
        assert_eq!(e.trace_keep.runs, KeepRuns::All);
        let e = parse(
            "x.toml",
            "name = \"n\"\n[trace]\nkeep = \"first\"\nkeep_max = \"500M\"\n",
        )
        .unwrap();
        assert!(e.trace);
        assert_eq!(
            e.trace_keep,
            TraceKeep {
                runs: KeepRuns::First,
                max_bytes: Some(500 << 20)
            }
        );
        let e = parse("x.toml", "name = \"n\"\ntrace = { keep = \"none\" }\n").unwrap();
        assert!(e.trace);
        assert_eq!(e.trace_keep.runs, KeepRuns::None);
        let e = parse("x.toml", "name = \"n\"\n[trace]\nkeep_max = 1000\n").unwrap();
        assert_eq!(e.trace_keep.max_bytes, Some(1000));
        // Every mistake, each at its line and column.
        let text =
            errors("name = \"n\"\n[trace]\nkeep = \"some\"\nkeep_max = \"lots\"\nkeeps = 1\n")
                .join("\n");
        assert!(
            text.contains("x.toml:3:8: `keep` says which runs keep their trace files"),
            "{text}"
        );
        assert!(text.contains("\"all\", \"first\""), "{text}");
        assert!(
            text.contains("x.toml:4:12: `keep_max` is not a size"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:5:1: unknown key `keeps` in [trace] (did you mean `keep`?)"),
            "{text}"
        );
        let text = errors("name = \"n\"\n[trace]\nkeep = 1\n").join("\n");
        assert!(text.contains("x.toml:3:8: `keep`"), "{text}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("1.5G"), None);
        assert_eq!(parse_size("G"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }
}

//! The top-level keys (`name`, `seed`, `warmup`, ...) and the walk over the whole file: which
//! table goes to which parser, and the checks that need more than one table.

use std::ops::Range;
use std::path::Path;

use toml::de::DeTable;

use super::engine_table;
use super::workload_table::JobRef;
use super::{
    Diagnostic, ExperimentError, Repetitions, Stabilise, TargetDevice, TargetSpec, TraceSettings,
    Walker,
};
use crate::experiment::factor::{Factor, FactorKind};
use crate::experiment::prepare::Prepare;
use crate::target::DEFAULT_SCRATCH_BYTES;
use crate::workload::job_file::{self, JobSource};
use crate::workload::options::{self, OptionPolicy};
use crate::workload::EngineSpec;

/// A validated experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    /// Where the text came from (a path, for messages).
    pub(crate) source: String,
    /// The file's text, stored with the experiment; a `[workload] job` file's text (and its
    /// includes') follows as TOML comments, so the store keeps what ran.
    pub text: String,
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) seed: u64,
    pub(crate) repetitions: Repetitions,
    pub(crate) warmup: bool,
    pub target: TargetSpec,
    /// Plain fio options in file order, values in fio's text form.
    pub workload: Vec<(String, String)>,
    /// Factors in file order; the matrix is the product of their levels.
    pub(crate) factors: Vec<Factor>,
    pub(crate) policy: OptionPolicy,
    /// Give each of fio's `numjobs` clones its own CPU of the placement
    /// (`cpus_allowed_policy=split`) instead of sharing them all.
    pub(crate) split_cpus: bool,
    /// Record a block trace of the target device during each measured run, store it beside
    /// the results and store its headline figures as `trace_*` metrics.
    pub trace: bool,
    /// Steps before every measured run (`[prepare]`).
    pub prepare: Prepare,
    /// Machine-wide controls set once for the whole experiment (`[stabilise]`).
    pub(crate) stabilise: Stabilise,
    /// Which traces stay on disk once analysed (`[trace] keep`, `keep_max`).
    pub(crate) trace_settings: TraceSettings,
    /// What runs: fio (the default) or a program engine (`engine`, with its table).
    pub(crate) engine: EngineSpec,
    /// What the file says that is allowed but likely not meant, with its line: the plan
    /// prints these with its own warnings.
    pub(crate) warnings: Vec<String>,
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

pub(super) const TOP_KEYS: &[&str] = &[
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

/// Validates an experiment given as text, reading a `[workload] job` file (relative to the
/// directory of `source`) and its environment through `files`.
pub(crate) fn parse_with(
    source: &str,
    text: &str,
    files: &dyn JobSource,
) -> Result<Experiment, ExperimentError> {
    let mut w = Walker {
        text,
        diags: Vec::new(),
        warnings: Vec::new(),
        files,
        dir: Path::new(source).parent().unwrap_or(Path::new("")),
        engine: EngineSpec::Fio,
        engine_line: 0,
        engine_broken: false,
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
    let policy = w.policy_and_engine(root);
    let mut top = w.top_level(root, &policy);
    w.factors_not_stabilised(&top.factors, &top.stabilise);
    let text = w.with_job_file(&mut top, &policy);
    w.conflicts(&top.workload, &top.workload_spans, &top.factors);
    w.engine_fits(&top.workload_spans, &top.factors, &top.target);
    w.net_sysctls_fit(&top.factors, &top.stabilise, top.stabilise_span.clone());
    w.matrix_size(top.factors_span.clone(), &top.factors, &top.repetitions);
    w.fits_hosts(&top);
    if !w.diags.is_empty() {
        w.diags.sort_by_key(|d| (d.line, d.column));
        return Err(fail(w));
    }
    Ok(Experiment {
        source: source.to_string(),
        text,
        name: top.name.unwrap_or_default(),
        description: top.description,
        seed: top.seed,
        repetitions: top.repetitions,
        warmup: top.warmup,
        target: top.target,
        workload: top.workload,
        factors: top.factors,
        policy,
        split_cpus: top.split_cpus,
        trace: top.trace,
        prepare: top.prepare,
        stabilise: top.stabilise,
        trace_settings: top.trace_settings,
        engine: w.engine,
        warnings: w.warnings,
    })
}

/// What the file's keys said, as read one by one, before the checks across tables.
struct TopLevel {
    name: Option<String>,
    description: Option<String>,
    seed: u64,
    repetitions: Repetitions,
    warmup: bool,
    split_cpus: bool,
    trace: bool,
    trace_settings: TraceSettings,
    trace_span: Range<usize>,
    /// Where `[prepare]` or `[stabilise]` is named (the first of the two), for refusals.
    machine_tables_span: Option<Range<usize>>,
    stabilise_span: Option<Range<usize>>,
    target: TargetSpec,
    workload: Vec<(String, String)>,
    /// Where each workload option came from: its key's span and, for an option of the job
    /// file, "job file FILE:LINE: " (the span then is the `job` value's).
    workload_spans: Vec<(Range<usize>, String)>,
    job: Option<JobRef>,
    factors: Vec<Factor>,
    factors_span: Range<usize>,
    prepare: Prepare,
    stabilise: Stabilise,
}

impl Walker<'_> {
    /// The policy flags and the engine, read first wherever they appear in the file: the
    /// flags decide how [workload] and [factors] are checked, the engine which factors are
    /// options.
    fn policy_and_engine(&mut self, root: &DeTable) -> OptionPolicy {
        let mut policy = OptionPolicy::default();
        for (key, value) in root.iter() {
            match key.get_ref().as_ref() {
                "allow_exec" => policy.allow_exec = self.boolean(value).unwrap_or(false),
                "allow_unknown_fio_options" => {
                    policy.allow_unknown = self.boolean(value).unwrap_or(false)
                }
                _ => {}
            }
        }
        let engine_value = root
            .iter()
            .find(|(k, _)| k.get_ref() == "engine")
            .map(|(_, v)| v);
        let engine_tables: Vec<_> = root
            .iter()
            .filter(|(k, _)| engine_table::TABLES.contains(&k.get_ref().as_ref()))
            .map(|(k, v)| (k.get_ref().to_string(), k.span(), v))
            .collect();
        self.engine = self.engine(engine_value, &engine_tables, policy.allow_exec);
        policy
    }

    /// Every top-level key, each to its table's parser, with the defaults of those left out.
    fn top_level(&mut self, root: &DeTable, policy: &OptionPolicy) -> TopLevel {
        let mut top = TopLevel {
            name: None,
            description: None,
            seed: 0,
            repetitions: Repetitions::Fixed(3),
            warmup: false,
            split_cpus: false,
            trace: false,
            trace_settings: TraceSettings::default(),
            trace_span: 0..0,
            machine_tables_span: None,
            stabilise_span: None,
            target: TargetSpec {
                device: TargetDevice::Scratch,
                count: 1,
                size_bytes: DEFAULT_SCRATCH_BYTES,
                scratch_keys: Vec::new(),
                anchor_cpu: None,
                nic: None,
                hosts: Vec::new(),
                host_specs: Vec::new(),
                local_devices: Vec::new(),
            },
            workload: Vec::new(),
            workload_spans: Vec::new(),
            job: None,
            factors: Vec::new(),
            factors_span: 0..0,
            prepare: Prepare::default(),
            stabilise: Stabilise::default(),
        };
        for (key, value) in root.iter() {
            match key.get_ref().as_ref() {
                "name" => top.name = self.nonempty_string(value, "name"),
                "description" => top.description = self.string(value, "description"),
                "seed" => {
                    if let Some(s) = self.integer_in(value, "seed", 0, i64::MAX) {
                        top.seed = s as u64;
                    }
                }
                "repetitions" => {
                    if let Some(r) = self.repetitions(value) {
                        top.repetitions = r;
                    }
                }
                "warmup" => top.warmup = self.boolean(value).unwrap_or(false),
                "split_cpus" => top.split_cpus = self.boolean(value).unwrap_or(false),
                "trace" => {
                    (top.trace, top.trace_settings) = self.trace(value);
                    top.trace_span = value.span();
                }
                "allow_exec" | "allow_unknown_fio_options" => {}
                "engine" | "command" | "iperf3" | "sockperf" => {}
                "target" => {
                    if let Some(t) = self.target(value) {
                        top.target = t;
                    }
                }
                "workload" => {
                    let (options, spans) = self.workload(value, policy);
                    top.workload = options;
                    top.workload_spans = spans.into_iter().map(|s| (s, String::new())).collect();
                    top.job = self.job_file(value);
                }
                "factors" => {
                    top.factors = self.factors(value, policy);
                    top.factors_span = key.span();
                }
                "prepare" => {
                    top.prepare = self.prepare(value);
                    top.machine_tables_span.get_or_insert(key.span());
                }
                "stabilise" => {
                    top.stabilise = self.stabilise(value);
                    top.machine_tables_span.get_or_insert(key.span());
                    top.stabilise_span = Some(key.span());
                }
                other => self.unknown_key(key.span(), other, "the top level", TOP_KEYS),
            }
        }
        if top.name.is_none() && !root.iter().any(|(k, _)| k.get_ref() == "name") {
            self.error(
                0..0,
                "the experiment has no `name`".to_string(),
                Some("name = \"a short title\" at the top of the file".to_string()),
            );
        }
        top
    }

    /// A system knob is either varied (a factor) or held ([stabilise]), not both; one that
    /// preflight's advice would hold is said to be the factor's.
    fn factors_not_stabilised(&mut self, factors: &[Factor], stabilise: &Stabilise) {
        for f in factors {
            if let FactorKind::System(k) = &f.kind {
                if stabilise.settings.iter().any(|(s, _)| s == k) {
                    self.diags.push(Diagnostic {
                        line: f.line,
                        column: 1,
                        message: format!("`{}` is a factor and is also set in [stabilise]", f.name),
                        allowed: Some("one of the two".to_string()),
                    });
                } else if stabilise.advice && k.is_advised() {
                    self.warnings.push(format!(
                        "what [stabilise] preflight = true sets `{}` to is replaced in every \
                         cell by the factor `{}` (line {})",
                        f.name, f.name, f.line
                    ));
                }
            }
        }
    }

    /// Puts a `[workload] job` file's options before the file's own, and returns the text to
    /// store: the file's, followed by the job file's (and its includes') as comments.
    fn with_job_file(&mut self, top: &mut TopLevel, policy: &OptionPolicy) -> String {
        let mut text = self.text.to_string();
        if let Some(job) = top.job.take() {
            let span = job.span.clone();
            let options = self.job_options(job, &top.target, policy, &mut text);
            let at = |o: &job_file::JobOption| (span.clone(), format!("job file {}: ", o.origin));
            top.workload_spans.splice(0..0, options.iter().map(at));
            top.workload
                .splice(0..0, options.into_iter().map(|o| (o.name, o.value)));
        }
        text
    }

    /// What `hosts` rules out: tracing more than one device per host or none of them,
    /// [prepare] and [stabilise], and factors that change only this machine.
    fn fits_hosts(&mut self, top: &TopLevel) {
        let (target, trace, trace_span) = (&top.target, top.trace, &top.trace_span);
        if trace && target.device_count() > 1 && !target.hosts.is_empty() {
            // A host's agent records the one device it drives.
            self.error(
                trace_span.clone(),
                format!(
                    "`trace = true` with `hosts` records one device on each host, but [target] \
                     names {}",
                    target.device_count()
                ),
                Some("one device in [target], or trace = false".to_string()),
            );
        }
        if target.hosts.is_empty() {
            return;
        }
        // Controlled hosts record their own devices through their agents; this machine
        // records its own `local_devices`.
        if trace && !target.controlled() && target.local_devices.is_empty() {
            self.error(
                trace_span.clone(),
                "`trace = true` records this machine's device; with `hosts` fio runs elsewhere"
                    .to_string(),
                Some(
                    "trace = false, or name every host in [[target.host]] with `ssh` so each \
                     records its own device, or this machine's own devices in `local_devices`"
                        .to_string(),
                ),
            );
        }
        if !top.prepare.is_empty() || top.stabilise != Stabilise::default() {
            self.error(
                top.machine_tables_span.clone().unwrap_or(0..0),
                "[prepare] and [stabilise] act on this machine; with `hosts` fio runs elsewhere"
                    .to_string(),
                Some("prepare the hosts yourself, or leave those tables out".to_string()),
            );
        }
        // Knobs, placement and interrupts are set on this machine only, unless every host is
        // controlled over SSH (`[[target.host]] ssh`): then its agent sets them there.
        let controlled = target.controlled();
        for f in &top.factors {
            let on_hosts = matches!(
                f.kind,
                FactorKind::QueueKnob { .. } | FactorKind::Placement | FactorKind::IrqAffinity
            );
            // A program engine's options are refused with `hosts` as a whole (engine_fits).
            let here_only = !matches!(
                f.kind,
                FactorKind::Fio { .. } | FactorKind::Polling | FactorKind::Engine { .. }
            );
            if here_only && !(controlled && on_hosts) {
                self.diags.push(Diagnostic {
                    line: f.line,
                    column: 1,
                    message: format!(
                        "factor `{}` changes this machine, but with `hosts` fio runs on other \
                         machines",
                        f.name
                    ),
                    allowed: Some(if controlled {
                        "fio options, hipri, queue knobs, placement and irq_cpu (set on each \
                         host by its agent); system knobs are set on no host"
                            .to_string()
                    } else {
                        "fio options and hipri (queue knobs, placement and irq_cpu too when every \
                         host is a [[target.host]] with `ssh`)"
                            .to_string()
                    }),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;
    use crate::experiment::factor::{LevelValue, Pinning};

    /// preflight's advice holds the governor, boost and idle states; a factor of one of them
    /// replaces it in every cell, which the file's warnings say (an explicit setting of the
    /// same control beside the factor is an error).
    #[test]
    fn a_factor_over_preflights_advice_is_said_to_replace_it() {
        let text = "name = \"n\"\n[workload]\nrw = \"read\"\n[factors]\n\
                    cpu.max_cstate = [0]\nsysctl.vm.dirty_ratio = [10]\n[stabilise]\npreflight = true\n";
        let e = parse("x.toml", text).unwrap();
        assert_eq!(
            e.warnings,
            [
                "what [stabilise] preflight = true sets `cpu.max_cstate` to is replaced in every \
              cell by the factor `cpu.max_cstate` (line 5)"
            ]
        );
        let quiet = parse(
            "x.toml",
            &text.replace("preflight = true", "preflight = false"),
        )
        .unwrap();
        assert!(quiet.warnings.is_empty(), "{:?}", quiet.warnings);
    }

    /// A network engine in namespaces of its own runs under their net.* sysctls, not this
    /// namespace's that iolab would set: refused, as factor and in [stabilise]; other
    /// sysctls, and net.* ones without namespaces, are taken.
    #[test]
    fn net_sysctls_are_refused_where_the_engine_runs_in_other_namespaces() {
        let text = "name = \"n\"\nengine = \"iperf3\"\n[iperf3]\nserver = \"10.1.0.2\"\n\
                    netns = \"cli\"\nserver_netns = \"srv\"\ntime = 1\n[factors]\n\
                    \"sysctl.net.ipv4.tcp_rmem\" = [\"4096 131072 6291456\"]\n\
                    sysctl.vm.dirty_ratio = [10]\n[stabilise]\n\"sysctl.net.core.somaxconn\" = 1024\n";
        let err = parse("x.toml", text).unwrap_err().to_string();
        assert!(
            err.contains(
                "x.toml:9:1: factor `sysctl.net.ipv4.tcp_rmem`: net.* sysctls belong to each \
                 network namespace, and iolab sets this one's, not those the iperf3 runs in \
                 (cli, srv)"
            ),
            "{err}"
        );
        assert!(
            err.contains("x.toml:11:2: [stabilise] `sysctl.net.core.somaxconn`"),
            "{err}"
        );
        assert!(!err.contains("dirty_ratio"), "{err}");
        let here = text
            .replace("netns = \"cli\"\nserver_netns = \"srv\"\n", "")
            .replace("\"sysctl.net.core.somaxconn\" = 1024\n", "");
        parse("x.toml", &here).unwrap();
    }

    /// A program engine with hosts is refused once, for what it is: its options are not
    /// also said to change this machine.
    #[test]
    fn a_program_engine_with_hosts_is_refused_once() {
        let text = "name = \"n\"\nengine = \"iperf3\"\n[iperf3]\nserver = \"10.1.0.2\"\n\
                    [target]\nhosts = [\"10.0.0.1\"]\n[factors]\nparallel = [1, 2]\n";
        let err = parse("x.toml", text).unwrap_err().to_string();
        assert!(
            err.contains(
                "`hosts` ([target] hosts or [[target.host]]) runs fio on other machines, but the \
                 engine is iperf3"
            ),
            "{err}"
        );
        assert!(!err.contains("parallel"), "{err}");
    }

    /// The refusal named line 1 of the file: it now names the table's.
    #[test]
    fn prepare_beside_hosts_is_refused_at_its_table() {
        let text = "name = \"n\"\n[target]\ndevice = \"sdb\"\nhosts = [\"10.0.0.1\"]\n\
                    [workload]\nrw = \"read\"\n[prepare]\ndrop_caches = true\n";
        let err = parse("x.toml", text).unwrap_err().to_string();
        assert!(
            err.contains("x.toml:7:2: [prepare] and [stabilise] act on this machine"),
            "{err}"
        );
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
}

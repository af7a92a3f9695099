//! `[workload]`: the plain fio options and the `job` file they may start from, each checked
//! against fio's option policy, and the options that conflict with a factor.

use std::ops::Range;
use std::path::Component;

use toml::de::DeValue;

use super::{scalar_text, type_name, Diagnostic, TargetDevice, TargetSpec, Value, Walker};
use crate::experiment::factor::{Factor, FactorKind};
use crate::workload::job_file;
use crate::workload::options::{self, OptionPolicy, PLACEMENT_OPTIONS, POLLING_ENGINES};

/// `[workload] job = "..."`: the job file's options (parsed, not yet checked), the span of
/// the value that names it, and the files read.
pub(super) struct JobRef {
    pub(super) options: Vec<job_file::JobOption>,
    pub(super) span: Range<usize>,
    pub(super) texts: Vec<(String, String)>,
}

impl Walker<'_> {
    pub(super) fn fio_option(
        &mut self,
        span: Range<usize>,
        name: &str,
        value: &str,
        policy: &OptionPolicy,
    ) {
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

    pub(super) fn workload(
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
    pub(super) fn job_file(&mut self, workload: &Value) -> Option<JobRef> {
        let DeValue::Table(table) = workload.get_ref() else {
            return None;
        };
        let v = table.get("job")?;
        let name = self.nonempty_string(v, "job")?;
        // Beside the experiment or below it, as the job file's own includes: an experiment
        // handed over must not make iolab read (and store, and quote) files elsewhere.
        let beside = std::path::Path::new(&name)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !beside {
            self.error(
                v.span(),
                format!(
                    "job = {name:?} lies outside the experiment file's directory; iolab reads \
                     job files only beside it or below it (copy the file there)"
                ),
                None,
            );
            return None;
        }
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
    pub(super) fn job_options(
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

    /// Options in [workload] that a factor sets itself.
    pub(super) fn conflicts(
        &mut self,
        workload: &[(String, String)],
        spans: &[(Range<usize>, String)],
        factors: &[Factor],
    ) {
        let has = |k: &FactorKind| factors.iter().any(|f| &f.kind == k);
        for ((name, value), (span, at)) in workload.iter().zip(spans) {
            let canon = options::canonical(name);
            // A job file's option is a base that factors vary on purpose; one written in
            // [workload] beside a factor of the same option is never run.
            let varied = factors.iter().find(|f| {
                matches!(&f.kind, FactorKind::Fio { option } if options::canonical(option) == canon)
            });
            if let Some(f) = varied.filter(|_| at.is_empty()) {
                self.warnings
                    .push(replaced_by_factor(name, value, "workload", f));
            }
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

/// The warning for an option of `[table]` that factor `f` sets in every cell.
pub(super) fn replaced_by_factor(name: &str, value: &str, table: &str, f: &Factor) -> String {
    let levels: Vec<&str> = f.levels.iter().map(|l| l.label.as_str()).collect();
    let advice = if levels.contains(&value.trim_matches('"')) {
        "remove it (it is one of the factor's levels already)"
    } else {
        "remove it, or make it one of the factor's levels"
    };
    format!(
        "`{name} = {value}` in [{table}] is replaced in every cell by the factor `{}` ({}; \
         line {}): no run uses it; {advice}",
        f.name,
        levels.join(", "),
        f.line
    )
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;

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

    #[test]
    fn a_workload_option_every_cell_replaces_is_warned_of_unless_a_job_file_set_it() {
        let e = parse(
            "x.toml",
            "name = \"n\"\n[workload]\nrw = \"read\"\nblocksize = \"4k\"\n\
             [factors]\nbs = [\"64k\", \"1m\"]\n",
        )
        .unwrap();
        assert_eq!(
            e.warnings,
            ["`blocksize = 4k` in [workload] is replaced in every cell by the factor `bs` (64k, \
              1m; line 6): no run uses it; remove it, or make it one of the factor's levels"]
        );
        let e = parse(
            "x.toml",
            "name = \"n\"\n[workload]\nrw = \"read\"\nbs = \"4k\"\n\
             [factors]\nbs = [\"4k\", \"8k\"]\n",
        )
        .unwrap();
        assert!(
            e.warnings[0].ends_with("remove it (it is one of the factor's levels already)"),
            "{:?}",
            e.warnings
        );
        let e = with_job(
            "name = \"n\"\n[workload]\njob = \"j.fio\"\n[factors]\nbs = [\"64k\", \"1m\"]\n",
            "[r]\nrw=read\nbs=4k\n",
        )
        .unwrap();
        assert_eq!(e.warnings, Vec::<String>::new());
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
    fn a_job_file_outside_the_experiments_directory_is_not_read() {
        for job in ["../j.fio", "/e/j.fio", "sub/../../j.fio"] {
            let toml = format!("name = \"n\"\n[workload]\njob = {job:?}\n");
            let text = with_job(&toml, "[j]\nbs=4k\n").unwrap_err().to_string();
            assert!(
                text.contains("lies outside the experiment file's directory"),
                "{job}: {text}"
            );
        }
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
}

//! One run of one cell, from its knobs to its row in the store: the cell's knobs and the
//! hosts' parts set, fio (or another engine) run under the sampler and the tracer, what it
//! measured placed on fio's measured interval and cross-checked, and the run stored. The
//! loop around it (`execute` in the parent) only orders runs and decides when to stop.
//! Each phase is a function of its own, in the order a run goes through them.

use anyhow::{Context, Result};

use super::{
    align, checks, environment, expendable, fio_logs_dir, hosts, per_second, stored, KnobWrite,
    Loop, Plan, PlanDevice, ResolvedCell, Settings,
};
use crate::experiment::plan::PlannedRun;
use crate::experiment::Experiment;
use crate::sample::SampleRun;
use crate::store::{NewRun, RunStatus};
use crate::workload::{FioOutcome, FioStatus, JobSpec};

/// How a run ended and its metrics (empty unless it succeeded).
pub(super) type RunResult = (RunStatus, Vec<(String, f64)>);

/// One run: knobs, fio under the sampler, the record. `Ok(None)` when it was interrupted
/// (nothing stored). A cell that cannot be realised is stored as not applicable.
pub(super) fn one_run(
    exp: &Experiment,
    plan: &Plan,
    (matrix_cell, cell): (&crate::experiment::Cell, &ResolvedCell),
    run: &PlannedRun,
    lp: &mut Loop,
) -> Result<Option<RunResult>> {
    let mut record = new_record(lp, cell, run);
    if let Some(why) = &cell.not_applicable {
        return stored_as(lp, record, RunStatus::NotApplicable(why.clone()));
    }
    // Each controlled host's part of the run: set up there, or over (not applicable, failed,
    // gone) before fio starts.
    // Before the cell's knobs: they are not to be written on another disk either.
    if let Some(why) = replaced_disk(lp) {
        anyhow::bail!("{why}; the experiment stops here");
    }
    let parts = hosts::apply(exp, lp.hosts, cell.index, lp.position);
    let prepared = write_knobs(lp, &cell.writes)
        .and_then(|()| exp.prepare.before_run(&lp.settings.root, lp.cancel));
    match prepared {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(why) => {
            record.end_unix = crate::store::time::now_unix();
            return stored_as(lp, record, RunStatus::Failed(why));
        }
    }

    if !lp.hosts.is_empty() && parts.iter().all(Option::is_some) {
        return without_any_host(exp, lp, parts, record);
    }
    if let Some(inv) = matrix_cell.invocation(exp, cell.cpus.as_deref()) {
        return engine_run(exp, plan, &inv, record, lp);
    }
    let job = fio_job(exp, lp, (matrix_cell, cell), run, &parts)?;
    let Some(ran) = measure(exp, plan, (cell, run), &job, parts, lp)? else {
        return Ok(None);
    };
    judge_and_store(exp, plan, (cell, run), &job, ran, record, lp)
}

/// A target disk that is no longer the one checked before the first run (a loop device
/// re-attached to another file, a drive swapped under its name): nothing was checked for data
/// on that one, so no run may go on there.
fn replaced_disk(lp: &Loop) -> Option<String> {
    lp.disks.iter().find_map(|(disk, then)| {
        let now = crate::knobs::disk_identity::of_disk(&lp.settings.root, disk);
        (now != *then).then(|| {
            format!(
                "/dev/{disk} is no longer the disk checked before the first run ({} then, {} \
                 now): it was re-attached or replaced",
                then.as_deref().unwrap_or("no disk"),
                now.as_deref().unwrap_or("no disk")
            )
        })
    })
}

/// The run's row before anything ran: its cell, round and tags, ending as it starts.
fn new_record(lp: &Loop, cell: &ResolvedCell, run: &PlannedRun) -> NewRun {
    let start_unix = crate::store::time::now_unix();
    NewRun {
        experiment_id: lp.experiment_id,
        cell_key: cell.key.clone(),
        // Factor name -> level: the names are the experiment file's, so a map, not a type.
        cell_levels: serde_json::Value::Object(
            cell.levels
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        ),
        repetition: run.round,
        warmup: run.warmup,
        start_unix,
        end_unix: start_unix,
        tags: lp.settings.tags.clone(),
        ..Default::default()
    }
}

/// A run that measured nothing, stored with why.
fn stored_as(lp: &mut Loop, mut record: NewRun, status: RunStatus) -> Result<Option<RunResult>> {
    record.status = status;
    lp.store.insert_run(&record)?;
    Ok(Some((record.status, Vec::new())))
}

/// No controlled host can take part: nothing runs; each host's run and the aggregate say why.
fn without_any_host(
    exp: &Experiment,
    lp: &mut Loop,
    parts: hosts::Parts,
    mut record: NewRun,
) -> Result<Option<RunResult>> {
    let nothing = (
        vec![None; parts.len()],
        vec![Default::default(); parts.len()],
    );
    let settled = hosts::settle(exp, lp.hosts, parts, nothing, (None, false), lp.position);
    record.status = hosts::aggregate_status(&settled).unwrap_or(RunStatus::Ok);
    record.end_unix = crate::store::time::now_unix();
    hosts::store_runs(lp.store, lp.hosts, settled, &record, &[])?;
    lp.store.insert_run(&record)?;
    Ok(Some((record.status, Vec::new())))
}

/// The cell's fio job: a section per device here, or per host, with the logs fio writes
/// itself confined to the run's own directory.
fn fio_job(
    exp: &Experiment,
    lp: &mut Loop,
    (matrix_cell, cell): (&crate::experiment::Cell, &ResolvedCell),
    run: &PlannedRun,
    parts: &hosts::Parts,
) -> Result<JobSpec> {
    let targets: Vec<(String, Option<Vec<u32>>)> = cell
        .devices
        .iter()
        .map(|d| (format!("/dev/{}", d.device), d.cpus.clone()))
        .collect();
    let mut job = matrix_cell
        .jobs(exp, &targets)
        .with_context(|| format!("cell {}: cannot build the fio job", cell.key))?;
    if !lp.hosts.is_empty() {
        job.per_host = hosts::jobs(exp, lp.hosts, matrix_cell, cell.index, parts)?;
    }
    // A warm-up's logs measure nothing: they go with the run's private directory.
    if !run.warmup && job.writes_logs() {
        let db = &lp.settings.db_path;
        let dir = fio_logs_dir(db, lp.experiment_id)
            .join(format!("cell{}-round{}", cell.index, run.round));
        // fio may write only there: it must be iolab's own all the way from the database's
        // directory, or another user's link could point fio's writes anywhere.
        crate::sys::own_dir::make_own_dir(db.parent().unwrap_or(std::path::Path::new("")), &dir)
            .map_err(anyhow::Error::msg)?;
        job.files_dir = Some(dir);
    }
    Ok(job)
}

/// What one fio run measured, here and on the hosts, before it is judged.
struct Ran {
    outcome: FioOutcome,
    /// When fio ended (the run's end, as stored).
    end_unix: f64,
    /// This machine's readings when fio ran here; with fio on other hosts, its figures are
    /// already placed on their interval (`local`).
    samples: Option<SampleRun>,
    local: LocalFigures,
    /// Each controlled host's part, settled.
    settled: Vec<hosts::Settled>,
    recorded: Option<super::trace::Recorded>,
    /// The interrupts watched, per watched device.
    irqs: Vec<Vec<u32>>,
    env_at_start: environment::RunEnvironment,
}

/// With fio on other hosts, this machine's own figures over fio's interval, its series and
/// that interval (all empty when fio ran here).
#[derive(Default)]
struct LocalFigures {
    metrics: Vec<(String, f64)>,
    series: Vec<crate::store::SampleSeries>,
    window: Option<align::WindowRecord>,
}

/// Runs fio under the sampler and the tracer (warm-ups are not traced: they are not
/// measured), with each host's sampler and tracer around its part. `Ok(None)` when it was
/// interrupted. Dropped unfinished (an error, Ctrl-C), a recording stops and its files go.
fn measure(
    exp: &Experiment,
    plan: &Plan,
    (cell, run): (&ResolvedCell, &PlannedRun),
    job: &JobSpec,
    mut parts: hosts::Parts,
    lp: &mut Loop,
) -> Result<Option<Ran>> {
    let tracer = match (&mut lp.tracing, run.warmup) {
        (Some(t), false) => {
            let progress = &mut *lp.progress;
            t.start(cell.index, run.round, &mut |m| progress.message(m))
        }
        _ => None,
    };
    let remote = !exp.target.hosts.is_empty();
    let watches = watches(plan, remote);
    // Short runs are sampled more often, so fio's measured interval spans enough readings
    // for its ends to be placed between them (`sample::window`).
    let cadence =
        crate::sample::window::cadence_for(lp.settings.sample_interval, job.measured_seconds());
    // fio servers' memory and command lines are theirs, not this machine's.
    let env_at_start = if remote {
        environment::of_iolab()
    } else {
        environment::at_start(&lp.settings.root, &device_names(&watches))
    };
    let sampler = crate::sample::start(&lp.settings.root, &watches, cadence)?;
    hosts::sample_start(exp, lp.hosts, cadence, &mut parts, lp.position);
    let traced = exp.trace && !run.warmup;
    if traced {
        hosts::trace_start(exp, lp.hosts, &mut parts, lp.position);
    }
    let outcome = hosts::renewing_leases(lp.hosts, || lp.runner.run(job));
    let samples = sampler.stop();
    let report = outcome.as_ref().ok().and_then(|o| o.report.as_ref());
    let answers = hosts::sample_stop(exp, lp.hosts, &mut parts, lp.position, report);
    let traces = if traced {
        hosts::trace_stop(exp, lp.hosts, &mut parts, lp.position)
    } else {
        vec![Default::default(); lp.hosts.len()]
    };
    let outcome = outcome?;
    let end_unix = crate::store::time::now_unix();
    if outcome.status == FioStatus::Cancelled || lp.cancel.is_cancelled() {
        return Ok(None);
    }
    let hosts_span = hosts::measured_span_unix_ns(lp.hosts, &answers);
    let settled = hosts::settle(
        exp,
        lp.hosts,
        parts,
        (answers, traces),
        (Some(&outcome), job.polls()),
        lp.position,
    );
    let (local, samples) = if remote {
        (local_figures(plan, &samples, &outcome, hosts_span), None)
    } else {
        (LocalFigures::default(), Some(samples))
    };
    let recorded = tracer.and_then(|t| match t.finish() {
        Ok(r) => Some(r),
        Err(e) => {
            lp.progress
                .message(&format!("trace: the run's recording failed: {e:#}"));
            None
        }
    });
    Ok(Some(Ran {
        outcome,
        end_unix,
        samples,
        local,
        settled,
        recorded,
        irqs: watches.iter().map(|w| w.irqs.clone()).collect(),
        env_at_start,
    }))
}

/// This machine's figures while fio ran on other hosts. With no host to say when fio
/// measured (fio servers alone), this machine's own devices do, as a host's device does on
/// the host: for fio's longest runtime, up to where their I/O stopped; without devices (or
/// with none busy), up to where fio exited.
fn local_figures(
    plan: &Plan,
    samples: &SampleRun,
    outcome: &FioOutcome,
    hosts_span: Option<(f64, f64)>,
) -> LocalFigures {
    let runtime = outcome.report.as_ref().and_then(hosts::longest_measured_ms);
    let aligned = match (hosts_span, runtime) {
        (None, Some(ms)) if !plan.local.is_empty() => align::align_to_local_activity(samples, ms),
        (None, Some(ms)) => align::align_to_fio_exit(samples, ms),
        _ => align::align_to_unix_span(samples, hosts_span),
    };
    LocalFigures {
        metrics: stored::local_metrics(aligned.summary.as_ref()),
        series: stored::series(samples),
        window: Some(aligned.window),
    }
}

/// The run's status, figures and cross-checks (fio's output against itself, the devices'
/// counters and the trace; each host's under its name), its trace kept as `[trace] keep`
/// says, and the run stored with its hosts' runs.
fn judge_and_store(
    exp: &Experiment,
    plan: &Plan,
    (cell, run): (&ResolvedCell, &PlannedRun),
    job: &JobSpec,
    ran: Ran,
    mut record: NewRun,
    lp: &mut Loop,
) -> Result<Option<RunResult>> {
    record.end_unix = ran.end_unix;
    // A run that cannot happen here is no warm-up of anything: it is the cell's record.
    record.warmup = run.warmup && !matches!(ran.outcome.status, FioStatus::NotApplicable { .. });
    record.status = match hosts::aggregate_status(&ran.settled) {
        Some(status) => status,
        None => run_status(ran.outcome.status.clone()),
    };
    let engine = exp.engine.engine();
    let reports = if engine.reports_measured_window() {
        ran.outcome.stdout.as_str()
    } else {
        ""
    };
    let aligned = ran
        .samples
        .as_ref()
        .map(|s| align::align(s, reports, &ran.irqs));
    let summary = aligned.as_ref().and_then(|a| a.summary.as_ref());
    let mut metrics = Vec::new();
    if record.status == RunStatus::Ok {
        let names = |d: &[PlanDevice]| d.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        metrics = stored::metrics(
            &ran.outcome,
            summary,
            &names(&plan.devices),
            &names(&plan.stacked),
        );
        metrics.extend(ran.settled.iter().flat_map(|s| s.prefixed.iter().cloned()));
        metrics.extend(ran.local.metrics);
    }
    let report = ran
        .outcome
        .report
        .as_ref()
        .filter(|_| engine.checks_its_output());
    let mut run_checks = match (report, &record.status) {
        (Some(report), RunStatus::Ok) => {
            output_checks(lp.settings, plan, report, aligned.as_ref(), job.polls())
        }
        _ => Vec::new(),
    };
    if let (Some(recorded), Some(tracing)) = (&ran.recorded, &mut lp.tracing) {
        if record.status == RunStatus::Ok {
            // A device's measured interval on the trace's clock, to count its bytes over:
            // where the sampler placed it by the device's I/O, else by fio's reports of the
            // jobs on it.
            let offset = crate::sys::realtime_minus_monotonic_ns();
            let window_of = |device: &str| {
                ran.samples
                    .as_ref()
                    .zip(aligned.as_ref())
                    .and_then(|(s, a)| {
                        align::activity_window_on_monotonic(s, &a.window, Some(device), offset)
                    })
                    .or_else(|| align::trace_window(reports, device, offset))
            };
            match tracing.judge(recorded, window_of, report) {
                Ok(judged) => {
                    // Across hosts, this machine's own devices' (`local_devices`).
                    let prefix = if exp.target.hosts.is_empty() {
                        ""
                    } else {
                        stored::LOCAL
                    };
                    let named = |(k, v): (String, f64)| (format!("{prefix}{k}"), v);
                    metrics.extend(judged.metrics.into_iter().map(named));
                    run_checks.extend(judged.checks);
                }
                Err(e) => lp.progress.message(&format!("trace: {e:#}")),
            }
        }
        // Kept compressed, or removed, as `[trace] keep` says.
        let progress = &mut *lp.progress;
        record.trace = tracing.keep(cell.index, recorded, &mut |m| progress.message(m));
    }
    record.metrics = metrics.clone();
    record.samples = ran
        .samples
        .as_ref()
        .map(stored::series)
        .unwrap_or(ran.local.series);
    record.series = per_second::series(
        ran.samples.as_ref(),
        aligned.as_ref().map(|a| &a.window),
        &ran.outcome.stdout,
    );
    record.sample_window = aligned
        .map(|a| a.window)
        .or(ran.local.window)
        .and_then(|w| serde_json::to_value(w).ok());
    // Each host's own checks, under its name: `show` of the aggregate lists what failed.
    for (c, s) in lp.hosts.iter().zip(&ran.settled) {
        run_checks.extend(s.checks.iter().map(|check| checks::Check {
            subject: format!("{}: {}", c.label(), check.subject),
            ..check.clone()
        }));
    }
    record.checks = (!run_checks.is_empty())
        .then(|| serde_json::to_value(&run_checks).ok())
        .flatten();
    record.environment = Some(environment::with_fio(
        ran.env_at_start,
        ran.outcome.report.as_ref(),
    ));
    // The status reports served the window; the store keeps the final one.
    record.fio_json = Some(crate::workload::fio_window::final_report_only(
        &ran.outcome.stdout,
    ));
    record.fio_command = Some(ran.outcome.command_line);
    record.job_file = Some(ran.outcome.job_file);
    hosts::store_runs(lp.store, lp.hosts, ran.settled, &record, &job.per_host)?;
    lp.store.insert_run(&record)?;
    Ok(Some((record.status, metrics)))
}

/// The checks of a successful run's fio output against itself and the machine: the bytes fio
/// moved against the devices' counters (where they were sampled), a `polled` run's I/Os
/// against its devices' interrupts, and its percentiles against its own histogram bins.
fn output_checks(
    settings: &Settings,
    plan: &Plan,
    report: &crate::workload::fio_json::FioReport,
    aligned: Option<&align::Aligned>,
    polled: bool,
) -> Vec<checks::Check> {
    let mut out = Vec::new();
    if let Some(summary) = aligned.and_then(|a| a.summary.as_ref()) {
        // Nothing else should reach a device that holds no data, so a gap there is news.
        let owned = |dev: &str| {
            plan.scratch
                || expendable(settings, dev).is_some()
                || plan.devices.iter().any(|d| d.name == dev && !d.holds_data)
        };
        let uncertain = aligned
            .map(|a| a.window.uncertain_mb_per_s.clone())
            .unwrap_or_default();
        out.extend(checks::bytes_vs_diskstats(
            report,
            &summary.devices,
            &owned,
            &uncertain,
        ));
        if polled {
            out.extend(checks::polled_io_vs_interrupts(report, &summary.devices));
        }
    }
    out.extend(checks::percentiles_vs_bins(report));
    out
}

/// What a workload's status (any engine's) is stored as; `Cancelled` runs are not stored.
fn run_status(status: FioStatus) -> RunStatus {
    match status {
        FioStatus::Success => RunStatus::Ok,
        FioStatus::NotApplicable { reason, .. } => RunStatus::NotApplicable(reason),
        FioStatus::FioError { message, .. } => RunStatus::Failed(message),
        FioStatus::Crash { reason } => RunStatus::Failed(reason),
        FioStatus::Cancelled => RunStatus::Failed("cancelled".into()),
    }
}

/// The devices sampled during a run: its targets and the devices below them, or, with fio
/// on other hosts, only this machine's own (`local`). The hosts' devices are theirs: this
/// machine's device of the same name is another one. This machine drives the hosts (and is
/// often their hypervisor): it is sampled as a whole too, its figures stored apart.
fn watches(plan: &Plan, remote: bool) -> Vec<crate::sample::Watch> {
    let here: Vec<&PlanDevice> = if remote {
        plan.local.iter().collect()
    } else {
        plan.devices.iter().chain(&plan.stacked).collect()
    };
    here.into_iter()
        .map(|d| crate::sample::Watch {
            device: d.name.clone(),
            irqs: d.irqs.clone(),
            nic: plan.nic.as_deref() == Some(d.name.as_str()),
        })
        .collect()
}

/// The block devices among the watched ones (a network workload watches its NIC too).
fn device_names(watches: &[crate::sample::Watch]) -> Vec<&str> {
    watches
        .iter()
        .filter(|w| !w.nic)
        .map(|w| w.device.as_str())
        .collect()
}

/// One run of a program engine (`command`, `iperf3`, `sockperf`) under the sampler, whose
/// figures are taken over the whole sampled span (the program says nothing about when it
/// measured), with the engine's metrics and per-interval series. `Ok(None)` when interrupted.
fn engine_run(
    exp: &Experiment,
    plan: &Plan,
    inv: &crate::workload::Invocation,
    mut record: NewRun,
    lp: &mut Loop,
) -> Result<Option<RunResult>> {
    let engine = exp.engine.engine();
    let watches = watches(plan, false);
    let env_at_start = environment::at_start(&lp.settings.root, &device_names(&watches));
    let every = crate::sample::Cadence::every(lp.settings.sample_interval);
    let sampler = crate::sample::start(&lp.settings.root, &watches, every)?;
    let ran = lp.runner.run_program(inv);
    let samples = sampler.stop();
    record.end_unix = crate::store::time::now_unix();
    let ran = match ran {
        Ok(r) => r,
        // A server that would not start, a program that is not there: this run failed.
        Err(e) if !lp.cancel.is_cancelled() => {
            return stored_as(lp, record, RunStatus::Failed(format!("{e:#}")));
        }
        Err(_) => return Ok(None),
    };
    let (status, figures) = crate::workload::engine::classify(engine, &ran.raw);
    if status == FioStatus::Cancelled || lp.cancel.is_cancelled() {
        return Ok(None);
    }
    record.status = run_status(status);
    let aligned = align::whole(
        &samples,
        format!("the {} engine reports no measured interval", engine.name()),
    );
    let mut metrics = Vec::new();
    if record.status == RunStatus::Ok {
        let names = |d: &[PlanDevice]| d.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        metrics.extend(
            figures
                .as_ref()
                .map(|f| f.metrics.clone())
                .unwrap_or_default(),
        );
        stored::sampler_metrics(
            &mut metrics,
            aligned.summary.as_ref(),
            &names(&plan.devices),
            &names(&plan.stacked),
        );
    }
    record.series = per_second::series(Some(&samples), Some(&aligned.window), "");
    if plan.nic.is_some() {
        stored::name_as_nic(&mut metrics, &mut record.series);
    }
    record.metrics = metrics.clone();
    record.samples = stored::series(&samples);
    record
        .samples
        .extend(
            figures
                .into_iter()
                .flat_map(|f| f.series)
                .map(|(key, t_offsets, values)| crate::store::SampleSeries {
                    kind: "engine".into(),
                    key,
                    t_offsets,
                    values,
                }),
        );
    record.sample_window = serde_json::to_value(aligned.window).ok();
    record.environment = Some(environment::with_fio(env_at_start, None));
    record.fio_command = Some(ran.command_line);
    lp.store.insert_run(&record)?;
    Ok(Some((record.status, metrics)))
}

/// Writes a cell's knobs through the journal (which maps them under the run's root), each
/// checked to hold once all are written; the reason of the first failure.
fn write_knobs(lp: &mut Loop, writes: &[KnobWrite]) -> std::result::Result<(), String> {
    lp.journal
        .set_all(writes.iter().map(|w| (w.path.as_str(), w.value.as_str())))
        .map(|_| ())
        .map_err(|e| format!("cannot set the cell's knobs: {e}"))
}

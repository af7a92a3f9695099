//! `iolab run`'s output: the resolved plan (`--dry-run`) and the outcome of an experiment,
//! as text for people or JSON for scripts, through `crate::output`.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Outcome, Plan};
use crate::report::table::MAX_WIDTH;

/// A dry run's plan; its JSON is the plan, its text needs the experiment too.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct PlanView<'a> {
    pub plan: &'a Plan,
    #[serde(skip)]
    pub exp: &'a crate::experiment::Experiment,
}

impl crate::output::Render for PlanView<'_> {
    fn text(&self) -> String {
        plan_text(self.plan, self.exp)
    }
}

/// What an experiment came to; `db_given`: the command named its database (the text's "see
/// it again" line then names it too).
pub(crate) struct OutcomeView<'a> {
    pub outcome: &'a Outcome,
    pub db_given: bool,
}

/// `run --json`. Scripts have always seen this document's objects with their keys sorted (it
/// was built with `json!`): `sorted_keys` keeps it byte for byte.
impl Serialize for OutcomeView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::output::sorted_keys(&OutcomeDoc::of(self.outcome), s)
    }
}

impl crate::output::Render for OutcomeView<'_> {
    fn text(&self) -> String {
        outcome_text(self.outcome, self.db_given)
    }
}

pub(crate) fn duration_text(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The resolved plan for people.
pub(crate) fn plan_text(plan: &Plan, exp: &crate::experiment::Experiment) -> String {
    // Cell keys, reasons and notes quote the file and the machine: escaped as a whole.
    crate::report::format::terminal_safe_lines(&plan_text_unescaped(plan, exp)).into_owned()
}

fn plan_text_unescaped(plan: &Plan, exp: &crate::experiment::Experiment) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "experiment: {} ({}), seed {}",
        exp.name, &exp.source, exp.seed
    );
    target_line(&mut out, plan, exp);
    let _ = writeln!(out, "cells ({}):", plan.cells.len());
    for c in &plan.cells {
        cell_lines(&mut out, plan, exp, c);
    }
    if !plan.stabilise.is_empty() {
        let _ = writeln!(
            out,
            "before the first run ([stabilise], journaled and put back after the last):"
        );
        for w in &plan.stabilise {
            let now = w.now.as_deref().map_or("unreadable", str::trim);
            let _ = writeln!(out, "  {}: {} {now} -> {}", w.setting, w.path, w.value);
        }
    }
    if !plan.prepare.is_empty() {
        let _ = writeln!(
            out,
            "before every measured run ([prepare]): {}",
            plan.prepare.join(", ")
        );
    }
    order_lines(&mut out, plan);
    match plan.estimated_seconds {
        Some(s) => {
            // The runs' own lengths: each run also starts and stops its workload, sets its
            // knobs and samples around it, which takes a second or more per run on its own.
            let _ = writeln!(
                out,
                "estimated time: {} of measuring, and start-up around each run",
                duration_text(s)
            );
        }
        None if exp.engine.engine().runs_job_file() => {
            let _ = writeln!(out, "estimated time: unknown (fio is not time based)");
        }
        None => {
            let _ = writeln!(
                out,
                "estimated time: unknown (a {} run has no set length)",
                exp.engine.engine().name()
            );
        }
    }
    for n in &plan.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for w in &plan.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for why in &plan.would_stop {
        let _ = writeln!(out, "warning: the run would stop before it starts: {why}");
    }
    out
}

/// What the plan runs on: a NIC, new scratch devices, or named devices (on hosts).
fn target_line(out: &mut String, plan: &Plan, exp: &crate::experiment::Experiment) {
    let names = plan
        .devices
        .iter()
        .map(|d| d.name.as_str())
        .collect::<Vec<_>>();
    if let Some(nic) = &plan.nic {
        let _ = writeln!(
            out,
            "target: NIC {nic} (on/near/far and irq_cpu refer to its interrupts: IRQ {})",
            plan.devices[0]
                .irqs
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else if plan.scratch {
        let _ = writeln!(
            out,
            "target: {} new scratch loop device(s) (created when the run starts; called {} \
             below)",
            names.len(),
            names.join(", ")
        );
    } else {
        let _ = writeln!(
            out,
            "target: /dev/{}{}",
            names.join(", /dev/"),
            if exp.target.hosts.is_empty() {
                String::new()
            } else {
                format!(" on {}", exp.target.hosts.join(", "))
            }
        );
    }
}

/// One cell: why it cannot run here, or where its workload runs and what it sets and writes.
fn cell_lines(
    out: &mut String,
    plan: &Plan,
    exp: &crate::experiment::Experiment,
    c: &super::ResolvedCell,
) {
    let _ = writeln!(out, "  #{:<3} {}", c.index, c.key);
    if let Some(why) = &c.not_applicable {
        let _ = writeln!(out, "        not applicable: {why}");
        return;
    }
    // Controlled hosts place (or cannot run) each cell by their own topology: said per host
    // in the notes below, not here, where nothing is pinned on this machine's model.
    if !plan.hosts.is_empty() {
        let _ = writeln!(
            out,
            "        {} on each host as its note below says",
            exp.engine.name()
        );
    }
    for d in c.devices.iter().filter(|_| plan.hosts.is_empty()) {
        // With several devices each has its own fio section and placement.
        let on = if plan.devices.len() > 1 {
            format!(" for /dev/{}", d.device)
        } else {
            String::new()
        };
        match (&d.cpus, &d.placement_why) {
            (Some(cpus), Some(why)) => {
                let _ = writeln!(
                    out,
                    "        {}{on} on {}: {why}",
                    exp.engine.name(),
                    crate::placement::cpus_text(cpus)
                );
            }
            _ => {
                let _ = writeln!(out, "        {}{on} unpinned", exp.engine.name());
            }
        }
    }
    for w in &c.writes {
        let _ = writeln!(out, "        set {} = {}", w.path, w.value);
    }
    if let Some(why) = &c.workload_writes {
        let _ = writeln!(out, "        writes to the device: {why}");
    }
    if let Some(cmd) = &c.command {
        let _ = writeln!(out, "        runs: {cmd}");
    }
}

/// The order of the runs, round by round (`w`: a warm-up run).
fn order_lines(out: &mut String, plan: &Plan) {
    let rounds = plan.order.iter().map(|r| r.round).max().unwrap_or(0);
    // Runs of cells that cannot run here are visited only to record why (progress skips them).
    let can_run = plan
        .order
        .iter()
        .filter(|r| plan.cells[r.cell].not_applicable.is_none())
        .count();
    let _ = writeln!(
        out,
        "order ({} runs in {rounds} round(s){}{}):",
        plan.order.len(),
        if can_run < plan.order.len() {
            format!(", {can_run} of them in cells that can run here")
        } else {
            String::new()
        },
        if plan.adaptive {
            "; adaptive: more rounds for imprecise cells"
        } else {
            ""
        }
    );
    for round in 1..=rounds {
        let cells: Vec<String> = plan
            .order
            .iter()
            .filter(|r| r.round == round)
            .map(|r| format!("{}{}", r.cell, if r.warmup { "w" } else { "" }))
            .collect();
        let _ = writeln!(out, "  round {round}: {}", cells.join(" "));
    }
}

fn outcome_text(o: &Outcome, db_given: bool) -> String {
    crate::report::format::terminal_safe_lines(&outcome_text_unescaped(o, db_given)).into_owned()
}

fn outcome_text_unescaped(o: &Outcome, db_given: bool) -> String {
    let mut out = String::new();
    let ran: usize = o.cells.iter().map(|c| c.runs.len()).sum();
    let na = o
        .cells
        .iter()
        .filter(|c| c.not_applicable.is_some())
        .count();
    let _ = writeln!(
        out,
        "experiment {} \"{}\": {ran} run(s) ok and {} failed, stored in {}, {na} cell(s) not \
         applicable{}",
        o.experiment_id,
        o.plan.experiment,
        o.failed_runs,
        o.db_path.display(),
        if o.interrupted { " (interrupted)" } else { "" }
    );
    out.push_str(&super::summary::table(&o.cells, o.runs_fio).render_text(MAX_WIDTH));
    if !o.capped_cells.is_empty() {
        let _ = writeln!(
            out,
            "adaptive repetitions: {} cell(s) reached `max` before the target precision on {}",
            o.capped_cells.len(),
            o.primary_metric
        );
    }
    let db = if db_given {
        format!(" --db {}", o.db_path.display())
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "see it again: iolab show {id} --summary{db} (with 95% CIs: iolab show {id}{db})",
        id = o.experiment_id
    );
    if !o.host_parts.is_empty() {
        let parts: Vec<String> = o
            .host_parts
            .iter()
            .map(|(host, id)| format!("{host} = experiment {id}"))
            .collect();
        let _ = writeln!(
            out,
            "each host's own runs: {} (iolab show {} --host HOST{db})",
            parts.join(", "),
            o.experiment_id
        );
    }
    out += &crate::knobs::leftovers::restore_notes(&o.restored);
    for why in &o.hosts_left {
        let _ = writeln!(out, "knobs may still be set: {why}");
    }
    if !o.hosts_left.is_empty() {
        let _ = writeln!(
            out,
            "once those hosts answer, run `iolab restore` here (it restores them over ssh)"
        );
    }
    out
}

/// What `run --json` prints: the outcome, the summary table as printed, and with controlled
/// hosts the experiment holding each host's own runs and the hosts that may still be changed.
#[derive(Serialize)]
struct OutcomeDoc<'a> {
    experiment_id: i64,
    db: &'a std::path::Path,
    interrupted: bool,
    failed_runs: usize,
    capped_cells: &'a [String],
    primary_metric: &'a str,
    summary: crate::report::table::Table,
    cells: &'a [super::CellResult],
    knob_changes: &'a [crate::knobs::JournalEntry],
    restored: &'a crate::knobs::RestoreReport,
    plan: &'a Plan,
    #[serde(skip_serializing_if = "Option::is_none")]
    hosts: Option<Vec<HostPart<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hosts_left: Option<&'a [String]>,
}

/// A controlled host and the experiment holding its own runs.
#[derive(Serialize)]
struct HostPart<'a> {
    host: &'a str,
    experiment_id: i64,
}

impl<'a> OutcomeDoc<'a> {
    fn of(o: &'a Outcome) -> Self {
        let hosts = !o.host_parts.is_empty();
        OutcomeDoc {
            experiment_id: o.experiment_id,
            db: &o.db_path,
            interrupted: o.interrupted,
            failed_runs: o.failed_runs,
            capped_cells: &o.capped_cells,
            primary_metric: &o.primary_metric,
            summary: super::summary::table(&o.cells, o.runs_fio),
            cells: &o.cells,
            knob_changes: &o.knob_changes,
            restored: &o.restored,
            plan: &o.plan,
            hosts: hosts.then(|| {
                o.host_parts
                    .iter()
                    .map(|(host, id)| HostPart {
                        host,
                        experiment_id: *id,
                    })
                    .collect()
            }),
            hosts_left: hosts.then_some(&o.hosts_left[..]),
        }
    }
}

//! The sequences behind `iolab irq plan`, `apply` and `rollback` — measure, plan, check,
//! journal, apply — each returning a typed result that prints as text or JSON through
//! `crate::output`, so the CLI only parses arguments and calls one function.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use super::{apply, inputs, plan, render};
use crate::knobs::RestoreReport;
use crate::model::Machine;
use crate::output::{sorted_keys, Render};
use crate::sys::SysRoot;

/// A plan and how long the rates behind it were measured (for the text).
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct Planned {
    pub plan: plan::Plan,
    #[serde(skip)]
    pub measured_s: f64,
}

impl Render for Planned {
    fn text(&self) -> String {
        render::plan_text(&self.plan, self.measured_s)
    }
}

/// Measures interrupt rates over `over` on `root` and plans a placement; `None` when
/// interrupted before the measurement ended. The model's journal of earlier placements is this
/// machine's only on a live root.
pub(crate) fn plan_now(
    root: &SysRoot,
    over: Duration,
    wait: &dyn Fn(Duration) -> bool,
    options: plan::Options,
) -> Result<Option<(Planned, Machine)>> {
    // A snapshot's placement journal is not this machine's: judge it by what it shows.
    let before = if root.is_live() {
        apply::before_iolab(&apply::journal_dir())?
    } else {
        Default::default()
    };
    super::check_options(&Machine::read_for_irqs(root)?, &before, &options)?;
    let Some((m, secs)) = crate::model::Machine::measure(root, over, wait)? else {
        return Ok(None);
    };
    let plan = super::plan_for(&m, &before, options)?;
    Ok(Some((
        Planned {
            plan,
            measured_s: secs,
        },
        m,
    )))
}

/// Where `irq apply` takes its plan from.
pub(crate) enum PlanSource {
    /// A plan saved by `iolab irq plan --json`.
    File(PathBuf),
    /// Measured now.
    Measure {
        over: Duration,
        options: plan::Options,
    },
}

/// What `irq apply` did: the plan and the moves it made. JSON keys sorted, as scripts have
/// always read them.
#[derive(Serialize)]
pub(crate) struct Outcome {
    #[serde(serialize_with = "sorted_keys")]
    pub applied: Vec<apply::Applied>,
    #[serde(serialize_with = "sorted_keys")]
    pub plan: plan::Plan,
}

impl Render for Outcome {
    fn text(&self) -> String {
        let said = if self.plan.moves.is_empty() {
            render::nothing_applied_text(&self.plan)
        } else if self.applied.is_empty() {
            "nothing to move: every interrupt is already where the plan puts it\n".to_string()
        } else {
            render::applied_text(&self.applied) + "undo with `iolab irq rollback`\n"
        };
        let notes = [
            render::unpinned_in_place_note(&self.plan),
            render::banned_offline_note(&self.plan),
        ];
        notes
            .into_iter()
            .flatten()
            .fold(said, |out, note| format!("{out}note: {note}\n"))
    }
}

/// Checks the plan against this machine and writes its moves through the placement journal
/// in `dir` (kept, so `irq rollback` can undo them). Refused beside a running irqbalance
/// unless `force`, and while another apply or a daemon holds the placement.
pub(crate) fn apply_plan(
    root: &SysRoot,
    dir: &Path,
    source: PlanSource,
    wait: &dyn Fn(Duration) -> bool,
    force: bool,
) -> Result<Outcome> {
    refuse_beside_irqbalance(root, force)?;
    let mut journal = apply::take_placement(dir, root)?;
    let outcome = (|| {
        let (p, m) = planned(root, dir, source, wait)?;
        apply::check(&p.moves, &m, &inputs::slots(&m))?;
        let applied = apply::apply(root, &m, &p.moves, &mut journal)?;
        apply::unpin_in_place(root, &p.unpinned_in_place, &mut journal)?;
        Ok(Outcome { applied, plan: p })
    })();
    // Whatever failed, an earlier placement in the journal stays in effect.
    apply::release(journal);
    outcome
}

/// The plan `source` gives, and the machine it is checked against.
fn planned(
    root: &SysRoot,
    dir: &Path,
    source: PlanSource,
    wait: &dyn Fn(Duration) -> bool,
) -> Result<(plan::Plan, Machine)> {
    match source {
        PlanSource::File(file) => {
            let text = crate::sys::user_file::read_text(&file)
                .map_err(|why| anyhow::anyhow!("cannot read the plan {}: {why}", file.display()))?;
            let p: plan::Plan = serde_json::from_str(&text).with_context(|| {
                format!(
                    "{}: not a plan written by `iolab irq plan --json`",
                    file.display()
                )
            })?;
            let m = Machine::read(root)?;
            let problems = apply::against_options(&p, &m, &apply::before_iolab(dir)?);
            if !problems.is_empty() {
                bail!(
                    "the plan {} cannot be applied here as it is:\n  {}",
                    file.display(),
                    problems.join("\n  ")
                );
            }
            Ok((p, m))
        }
        PlanSource::Measure { over, options } => {
            let before = apply::before_iolab(dir)?;
            super::check_options(&Machine::read_for_irqs(root)?, &before, &options)?;
            let Some((m, _)) = crate::model::Machine::measure(root, over, wait)? else {
                bail!("interrupted before the measurement ended; nothing was changed");
            };
            Ok((super::plan_for(&m, &before, options)?, m))
        }
    }
}

/// irqbalance would move the interrupts iolab places: refused unless `force`.
pub(crate) fn refuse_beside_irqbalance(root: &SysRoot, force: bool) -> Result<()> {
    if let (Some(pid), false) = (super::irqbalance_pid(root), force) {
        bail!(
            "irqbalance (pid {pid}) is running and would move the interrupts again; stop it \
             first, or pass --force"
        );
    }
    Ok(())
}

/// What `irq rollback` put back (`None`: nothing placed by iolab), how many interrupts it left
/// placed (`--after-daemon` leaves a placement meant to stay), and the interrupts' names to
/// say which each line is about (text only).
pub(crate) struct RolledBack {
    pub report: Option<RestoreReport>,
    pub left_in_effect: usize,
    names: BTreeMap<u32, String>,
}

/// As JSON, nothing to roll back is a report with nothing in it (a script reads the same
/// fields either way), not `null`.
impl Serialize for RolledBack {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            #[serde(flatten)]
            report: &'a RestoreReport,
            left_in_effect: usize,
        }
        let none = RestoreReport::default();
        Json {
            report: self.report.as_ref().unwrap_or(&none),
            left_in_effect: self.left_in_effect,
        }
        .serialize(s)
    }
}

impl Render for RolledBack {
    fn text(&self) -> String {
        match (&self.report, self.left_in_effect) {
            (None, 0) => "no interrupt placement by iolab to roll back\n".to_string(),
            (None, n) => format!(
                "the affinity of {n} interrupt(s) placed by `iolab irq apply` (or a daemon with \
                 --keep) is left in effect: only a placement a daemon without --keep left when \
                 it was killed is rolled back with --after-daemon\n"
            ),
            (Some(r), _) => crate::knobs::leftovers::restored_lines(
                r,
                "the interrupt no longer exists",
                &self.names,
            ),
        }
    }
}

/// Puts back every affinity in the placement journal; `after_daemon`, only one a daemon
/// without --keep left when it was killed (a service manager's clean-up after the daemon,
/// which must not undo an `irq apply` the daemon refused to start beside).
pub(crate) fn rollback(after_daemon: bool) -> Result<RolledBack> {
    let (dir, root) = (apply::journal_dir(), SysRoot::live());
    let report = apply::rollback(&dir, &root, after_daemon)?;
    let left_in_effect = match report {
        None if after_daemon => apply::placed_irqs(&crate::knobs::pending(&dir)?),
        _ => 0,
    };
    Ok(RolledBack {
        report,
        left_in_effect,
        names: super::names(&root),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two applies at once both measured, then both wrote. The placement is taken before the
    /// measurement: a second apply is refused at once, even one that would move nothing.
    #[test]
    fn an_apply_beside_another_is_refused_before_it_measures() {
        let machine = super::super::fixture::two_node();
        let root = SysRoot::at(machine.path()).unwrap();
        let state = tempfile::tempdir().unwrap();
        let nothing_heavy = || PlanSource::Measure {
            over: Duration::from_secs(1),
            options: plan::Options {
                heavy: 1e12,
                ..plan::Options::default()
            },
        };
        let holder = apply::take_placement(state.path(), &root).unwrap();
        let err = apply_plan(&root, state.path(), nothing_heavy(), &|_| true, true)
            .err()
            .expect("refused while another holds the placement");
        let err = format!("{err:#}");
        assert!(
            err.contains("holds the interrupt placement") && err.contains("nothing was measured"),
            "{err}"
        );
        drop(holder);
        let done = apply_plan(&root, state.path(), nothing_heavy(), &|_| true, true).unwrap();
        assert!(done.plan.moves.is_empty() && done.applied.is_empty());
        // Nothing placed: no journal left behind.
        assert!(crate::knobs::pending(state.path()).unwrap().is_empty());
        assert!(!state.path().join("journal.json").exists());
    }
}

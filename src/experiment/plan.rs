//! From an experiment to an ordered list of runs. The matrix is the product of the factors'
//! levels in file order (the last factor varies fastest), so cell numbers and keys
//! (`rq_affinity=1,placement=far`) are stable. Runs go in rounds: every cell's repetition r
//! runs before any cell's repetition r+1, and within a round the order is shuffled from the
//! seed. On a noisy machine, drift over time (thermal, page cache, a neighbour waking up) then
//! spreads over all cells instead of masquerading as the effect of whichever factor happened
//! to run last. Each round's order depends only on (seed, round), so adaptive decisions about
//! later rounds do not change earlier ones, and a run can be reproduced from its record.

use serde::Serialize;

use super::factor::{FactorKind, IrqPlacement, Level, LevelValue, Pinning};
use super::file::{Experiment, Repetitions};
use crate::workload::{options, JobBuilder, JobError, JobSpec};

/// One combination of levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Position in matrix order, from 0.
    pub(crate) index: usize,
    /// (factor name, kind, level) in factor order.
    pub(crate) levels: Vec<(String, FactorKind, Level)>,
    /// `factor=label,...`; labels with `,`, `=`, quotes or spaces are quoted. `base` when the
    /// experiment has no factors.
    pub key: String,
}

/// One run in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlannedRun {
    pub cell: usize,
    /// Repetition number, from 1. A warm-up belongs to round 1 and is not a repetition.
    pub(crate) round: u32,
    /// A warm-up run: executed, not stored as a result.
    pub(crate) warmup: bool,
}

pub(crate) fn quote_label(label: &str) -> String {
    if label.is_empty()
        || label
            .chars()
            .any(|c| c == ',' || c == '=' || c == '"' || c.is_whitespace())
    {
        format!("\"{}\"", label.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        label.to_string()
    }
}

/// The cells of the matrix in stable order.
pub fn cells(exp: &Experiment) -> Vec<Cell> {
    let mut combos: Vec<Vec<(String, FactorKind, Level)>> = vec![Vec::new()];
    for factor in &exp.factors {
        combos = combos
            .into_iter()
            .flat_map(|prefix| {
                factor.levels.iter().map(move |level| {
                    let mut c = prefix.clone();
                    c.push((factor.name.clone(), factor.kind.clone(), level.clone()));
                    c
                })
            })
            .collect();
    }
    combos
        .into_iter()
        .enumerate()
        .map(|(index, levels)| {
            let key = if levels.is_empty() {
                "base".to_string()
            } else {
                levels
                    .iter()
                    .map(|(name, _, level)| format!("{name}={}", quote_label(&level.label)))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            Cell { index, levels, key }
        })
        .collect()
}

impl Cell {
    /// The level of a factor in this cell.
    #[cfg(test)]
    pub(crate) fn level(&self, factor: &str) -> Option<&Level> {
        self.levels
            .iter()
            .find(|(n, _, _)| n == factor)
            .map(|(_, _, l)| l)
    }

    /// fio options this cell sets on top of the base workload.
    pub(crate) fn fio_overrides(&self) -> Vec<(String, String)> {
        self.option_levels(|k| match k {
            FactorKind::Fio { option } => Some(option),
            _ => None,
        })
    }

    /// (option, value) of the levels whose factor `pick` names an option of.
    fn option_levels(
        &self,
        pick: impl Fn(&FactorKind) -> Option<&String>,
    ) -> Vec<(String, String)> {
        self.levels
            .iter()
            .filter_map(|(_, kind, level)| match (pick(kind), &level.value) {
                (Some(option), LevelValue::Fio(v)) => Some((option.clone(), v.clone())),
                _ => None,
            })
            .collect()
    }

    /// A program engine's options for this cell: the engine table's, then the cell's levels.
    pub(crate) fn engine_options(&self, exp: &Experiment) -> Vec<(String, String)> {
        let base = exp.engine.engine().base_options().to_vec();
        base.into_iter()
            .chain(self.option_levels(|k| match k {
                FactorKind::Engine { option } => Some(option),
                _ => None,
            }))
            .collect()
    }

    /// A program engine's invocation for this cell, pinned to `cpus`; `None` for fio.
    pub(crate) fn invocation(
        &self,
        exp: &Experiment,
        cpus: Option<&[u32]>,
    ) -> Option<crate::workload::Invocation> {
        let mut inv = exp.engine.engine().invocation(&self.engine_options(exp))?;
        inv.cell_key = self.key.clone();
        inv.cpus = cpus.map(<[u32]>::to_vec);
        Some(inv)
    }

    /// Queue attributes to set: (path under queue/, value), in factor order.
    pub(crate) fn queue_knobs(&self) -> Vec<(String, String)> {
        self.levels
            .iter()
            .filter_map(|(_, kind, level)| match (kind, &level.value) {
                (FactorKind::QueueKnob { attribute }, LevelValue::Knob(v)) => {
                    Some((attribute.clone(), v.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Why one of this cell's queue-knob levels puts the device's data at risk, if one does
    /// (`queue_knobs::endangers_data`).
    pub(crate) fn endangers_data(&self) -> Option<String> {
        self.queue_knobs()
            .iter()
            .find_map(|(a, v)| super::queue_knobs::endangers_data(a, v))
    }

    /// Machine-wide controls to set: (control, normalised level), in factor order.
    pub(crate) fn system_knobs(&self) -> Vec<(&super::system_knobs::SystemKnob, &str)> {
        self.levels
            .iter()
            .filter_map(|(_, kind, level)| match (kind, &level.value) {
                (FactorKind::System(k), LevelValue::Knob(v)) => Some((k, v.as_str())),
                _ => None,
            })
            .collect()
    }

    pub fn polling(&self) -> Option<bool> {
        self.levels.iter().find_map(|(_, _, l)| match l.value {
            LevelValue::Polling(p) => Some(p),
            _ => None,
        })
    }

    pub fn placement(&self) -> Option<&Pinning> {
        self.levels.iter().find_map(|(_, _, l)| match &l.value {
            LevelValue::Placement(p) => Some(p),
            _ => None,
        })
    }

    pub(crate) fn irq_placement(&self) -> Option<&IrqPlacement> {
        self.levels.iter().find_map(|(_, _, l)| match &l.value {
            LevelValue::Irq(p) => Some(p),
            _ => None,
        })
    }

    /// The base workload with this cell's overrides, in job-file order.
    pub(crate) fn fio_options(&self, exp: &Experiment) -> Vec<(String, String)> {
        let mut b = JobBuilder::new("x");
        for (n, v) in exp.workload.iter().chain(self.fio_overrides().iter()) {
            b = b.set(n, v);
        }
        b.filename("-")
            .policy(options::OptionPolicy {
                allow_unknown: true,
                allow_exec: true,
                allow_destructive: true,
            })
            .build()
            .map(|j| j.options)
            .unwrap_or_default()
    }

    /// How long one run of this cell should take, as its engine reads the cell's options
    /// (fio: ramp_time + runtime when `time_based`); for progress and ETA. `None` when the
    /// workload decides (fio by size).
    pub fn nominal_seconds(&self, exp: &Experiment) -> Option<f64> {
        exp.engine
            .engine()
            .nominal_seconds(&self.workload_options(exp))
    }

    /// The cell's options as its engine reads them: fio's job options, or a program
    /// engine's table with the cell's levels.
    pub(crate) fn workload_options(&self, exp: &Experiment) -> Vec<(String, String)> {
        if exp.engine.engine().runs_job_file() {
            self.fio_options(exp)
        } else {
            self.engine_options(exp)
        }
    }

    /// Why this cell's workload writes, if it does.
    pub fn writes(&self, exp: &Experiment) -> Option<String> {
        let opts = self.fio_options(exp);
        options::writes(opts.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    }

    /// The fio job for this cell on `filename`, pinned to `cpus` (resolved from the placement
    /// by the machine model; `None` leaves fio unpinned).
    pub fn job(
        &self,
        exp: &Experiment,
        filename: &str,
        cpus: Option<&[u32]>,
    ) -> Result<JobSpec, JobError> {
        let mut b = JobBuilder::new("iolab")
            .cell_key(&self.key)
            .policy(exp.policy)
            .filename(filename);
        for (n, v) in exp.workload.iter().chain(self.fio_overrides().iter()) {
            b = b.set(n, v);
        }
        if let Some(cpus) = cpus {
            b = b.cpus(cpus, exp.split_cpus);
        }
        if let Some(p) = self.polling() {
            b = b.polling(p);
        }
        b.build()
    }

    /// One fio job driving every target at once: a section per `(filename, cpus)`, each
    /// pinned to its own device's placement.
    pub(crate) fn jobs(
        &self,
        exp: &Experiment,
        targets: &[(String, Option<Vec<u32>>)],
    ) -> Result<JobSpec, JobError> {
        let sections = targets
            .iter()
            .map(|(f, cpus)| self.job(exp, f, cpus.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        JobSpec::join(sections).ok_or(JobError::NoTarget)
    }
}

/// A small, fast, well-mixed PRNG (SplitMix64); enough for shuffling, and stable across
/// platforms and crate versions, which a recorded seed needs.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n without modulo bias (rejection sampling); n > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// Fisher–Yates shuffle.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// The order of the given cells in one round: shuffled from (seed, round) alone.
pub(crate) fn round_order(seed: u64, round: u32, cells: &[usize]) -> Vec<usize> {
    let mut rng = SplitMix64::new(seed ^ (u64::from(round)).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut order = cells.to_vec();
    rng.shuffle(&mut order);
    order
}

/// Hands out rounds of runs; asks, after the minimum, which cells need more (adaptive).
#[derive(Debug, Clone)]
pub struct Planner {
    cells: Vec<Cell>,
    seed: u64,
    repetitions: Repetitions,
    warmup: bool,
    rounds_done: u32,
}

impl Planner {
    pub fn new(exp: &Experiment) -> Self {
        Planner {
            cells: cells(exp),
            seed: exp.seed,
            repetitions: exp.repetitions.clone(),
            warmup: exp.warmup,
            rounds_done: 0,
        }
    }

    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// The next round, or `None` when the experiment is done. `needs_more(cell)` is asked
    /// only for adaptive repetitions past the minimum: should this cell get another run?
    pub(crate) fn next_round(
        &mut self,
        mut needs_more: impl FnMut(&Cell) -> bool,
    ) -> Option<Vec<PlannedRun>> {
        let round = self.rounds_done + 1;
        if round > self.repetitions.max_rounds() {
            return None;
        }
        let wanted: Vec<usize> = if round <= self.repetitions.min_rounds() {
            (0..self.cells.len()).collect()
        } else {
            self.cells
                .iter()
                .filter(|c| needs_more(c))
                .map(|c| c.index)
                .collect()
        };
        if wanted.is_empty() {
            return None;
        }
        let mut runs = Vec::new();
        for cell in round_order(self.seed, round, &wanted) {
            if self.warmup && round == 1 {
                runs.push(PlannedRun {
                    cell,
                    round,
                    warmup: true,
                });
            }
            runs.push(PlannedRun {
                cell,
                round,
                warmup: false,
            });
        }
        self.rounds_done = round;
        Some(runs)
    }

    /// All rounds of a fixed-repetition experiment (adaptive: the minimum rounds).
    pub fn fixed_plan(exp: &Experiment) -> Vec<PlannedRun> {
        let mut p = Planner::new(exp);
        let min = p.repetitions.min_rounds();
        let mut all = Vec::new();
        while p.rounds_done < min {
            match p.next_round(|_| false) {
                Some(r) => all.extend(r),
                None => break,
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::file::parse;
    use std::collections::BTreeSet;

    fn exp(extra: &str) -> Experiment {
        parse(
            "t.toml",
            &format!(
                "name = \"t\"\nseed = 7\n{extra}\n[workload]\nrw = \"randread\"\nbs = \"4k\"\n\
                 [factors]\nrq_affinity = [0, 1, 2]\nplacement = [\"on\", \"far\", [0, 2]]\n\
                 hipri = [false, true]\nbs = [\"4k\", \"1m\"]\n"
            ),
        )
        .unwrap()
    }

    #[test]
    fn matrix_order_and_keys_are_stable() {
        let e = exp("");
        let c = cells(&e);
        assert_eq!(c.len(), 3 * 3 * 2 * 2);
        assert_eq!(c[0].key, "rq_affinity=0,placement=on,hipri=false,bs=4k");
        assert_eq!(c[1].key, "rq_affinity=0,placement=on,hipri=false,bs=1m");
        assert_eq!(c[2].key, "rq_affinity=0,placement=on,hipri=true,bs=4k");
        assert_eq!(
            c[35].key,
            "rq_affinity=2,placement=\"0,2\",hipri=true,bs=1m"
        );
        let keys: BTreeSet<&str> = c.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys.len(), c.len(), "keys are unique");
        assert!(c.iter().enumerate().all(|(i, c)| c.index == i));
    }

    #[test]
    fn cell_accessors_and_jobs() {
        let e = exp("");
        let c = &cells(&e)[35];
        assert_eq!(
            c.queue_knobs(),
            [("rq_affinity".to_string(), "2".to_string())]
        );
        assert_eq!(c.polling(), Some(true));
        assert_eq!(
            c.placement(),
            Some(&Pinning::Pinned(crate::placement::Placement::Cpus(vec![
                0, 2
            ])))
        );
        assert_eq!(c.fio_overrides(), [("bs".to_string(), "1m".to_string())]);
        assert_eq!(c.level("bs").unwrap().label, "1m");
        let job = c.job(&e, "/dev/loop3", Some(&[0, 2])).unwrap();
        let file = job.job_file();
        assert!(
            file.contains("bs=1m\n") && !file.contains("bs=4k"),
            "{file}"
        );
        assert!(
            file.contains("cpus_allowed=0,2\nioengine=io_uring\nhipri=1\n"),
            "{file}"
        );
        assert!(!file.contains("cpus_allowed_policy"), "{file}");
        assert_eq!(job.cell_key, c.key);
        assert!(c.writes(&e).is_none());
        assert_eq!(c.nominal_seconds(&e), None, "not time based");
        let timed = parse(
            "t.toml",
            "name = \"t\"\n[workload]\nruntime = \"4s\"\nramp_time = 1\ntime_based = true\n",
        )
        .unwrap();
        assert_eq!(cells(&timed)[0].nominal_seconds(&timed), Some(5.0));
        // fio waits its startdelay first.
        for (delay, total) in [("\"3s\"", 8.0), ("\"2m\"", 125.0)] {
            let delayed = parse(
                "t.toml",
                &format!(
                    "name = \"t\"\n[workload]\nruntime = \"4s\"\nramp_time = 1\n\
                     time_based = true\nstartdelay = {delay}\n"
                ),
            )
            .unwrap();
            assert_eq!(cells(&delayed)[0].nominal_seconds(&delayed), Some(total));
        }
    }

    #[test]
    fn split_cpus_is_passed_to_fio() {
        let e = exp("split_cpus = true");
        let job = cells(&e)[0].job(&e, "/dev/loop3", Some(&[0, 1])).unwrap();
        assert!(job
            .job_file()
            .contains("cpus_allowed=0-1\ncpus_allowed_policy=split\n"));
        let unpinned = cells(&e)[0].job(&e, "/dev/loop3", None).unwrap();
        assert!(!unpinned.job_file().contains("cpus_allowed"));
    }

    #[test]
    fn a_factor_can_make_a_cell_write() {
        let e = parse(
            "t.toml",
            "name = \"t\"\n[workload]\nrw = \"read\"\n[factors]\nrw = [\"read\", \"write\"]\n",
        )
        .unwrap();
        let c = cells(&e);
        assert!(c[0].writes(&e).is_none());
        assert!(c[1].writes(&e).unwrap().contains("rw=write"));
        assert!(e.workload_writes().is_none());
    }

    #[test]
    fn no_factors_is_one_base_cell() {
        let e = parse("t.toml", "name = \"t\"\nrepetitions = 2\n").unwrap();
        let c = cells(&e);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].key, "base");
        assert_eq!(Planner::fixed_plan(&e).len(), 2);
    }

    #[test]
    fn labels_that_need_quoting() {
        assert_eq!(quote_label("write back"), "\"write back\"");
        assert_eq!(quote_label("a\"b"), "\"a\\\"b\"");
        assert_eq!(quote_label("4k"), "4k");
    }

    #[test]
    fn rounds_are_complete_interleaved_and_shuffled() {
        let e = exp("repetitions = 4");
        let plan = Planner::fixed_plan(&e);
        let n = cells(&e).len();
        assert_eq!(plan.len(), 4 * n);
        for (r, chunk) in plan.chunks(n).enumerate() {
            let seen: BTreeSet<usize> = chunk.iter().map(|p| p.cell).collect();
            assert_eq!(seen.len(), n, "round {r} has every cell once");
            assert!(chunk.iter().all(|p| p.round == r as u32 + 1 && !p.warmup));
        }
        let orders: Vec<Vec<usize>> = plan
            .chunks(n)
            .map(|c| c.iter().map(|p| p.cell).collect())
            .collect();
        assert_ne!(orders[0], (0..n).collect::<Vec<_>>(), "shuffled");
        assert_ne!(orders[0], orders[1], "each round has its own order");
    }

    #[test]
    fn same_seed_same_order_other_seed_other_order() {
        let a = Planner::fixed_plan(&exp("repetitions = 3"));
        let b = Planner::fixed_plan(&exp("repetitions = 3"));
        assert_eq!(a, b);
        let other = parse(
            "t.toml",
            &exp("repetitions = 3").text.replace("seed = 7", "seed = 8"),
        )
        .unwrap();
        assert_ne!(a, Planner::fixed_plan(&other));
    }

    #[test]
    fn warmups_precede_each_cells_first_run() {
        let e = exp("repetitions = 2\nwarmup = true");
        let plan = Planner::fixed_plan(&e);
        let n = cells(&e).len();
        assert_eq!(plan.len(), 3 * n);
        let mut p = Planner::new(&e);
        let first = p.next_round(|_| false).unwrap();
        for pair in first.chunks(2) {
            assert!(pair[0].warmup && !pair[1].warmup && pair[0].cell == pair[1].cell);
        }
        let second = p.next_round(|_| false).unwrap();
        assert!(second.iter().all(|r| !r.warmup));
        assert!(p.next_round(|_| true).is_none());
        assert_eq!(first.len() + second.len(), 3 * n);
    }

    #[test]
    fn adaptive_rounds_ask_which_cells_need_more() {
        let e = exp("repetitions = { target_ci = 0.05, min = 2, max = 4 }");
        let mut p = Planner::new(&e);
        let mut asked = 0;
        // The minimum rounds never ask.
        for _ in 0..2 {
            p.next_round(|_| {
                asked += 1;
                true
            })
            .unwrap();
        }
        assert_eq!(asked, 0);
        let third = p.next_round(|c| c.index % 2 == 0).unwrap();
        let cells: BTreeSet<usize> = third.iter().map(|r| r.cell).collect();
        assert_eq!(cells, (0..36).step_by(2).collect());
        assert!(third.iter().all(|r| r.round == 3));
        // Nothing needs more: done before max.
        assert!(p.next_round(|_| false).is_none());
        // Max reached: done even if cells still need more.
        let mut q = Planner::new(&e);
        let mut rounds = 0;
        while q.next_round(|_| true).is_some() {
            rounds += 1;
        }
        assert_eq!(rounds, 4);
    }

    #[test]
    fn prng_is_stable_and_unbiased_enough() {
        // Reference values pin the generator: a recorded seed must replay the same order.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        let mut counts = [0u32; 3];
        let mut r = SplitMix64::new(42);
        for _ in 0..30_000 {
            counts[r.below(3) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }
}

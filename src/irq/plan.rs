//! The interrupt placement planner: given each interrupt's measured rate per CPU and the CPU
//! topology, decide which interrupts to move where. It follows what case 2 found to matter:
//! consider all heavy interrupts together (balancing each on its own piles them up), spread
//! them across packages first, then cores, then SMT siblings; ignore light ones; and move
//! nothing once the load is balanced (moves cost cache warmth). For the same reason each move
//! must be worth it: a placement with fewer moves is kept when the extra ones would lower the
//! peaks by less than `--min-gain` of the rate they move. Interrupts the kernel manages
//! and interrupts whose affinity allows one CPU only (a user's pin) stay where they are, and
//! every other interrupt stays inside the CPU set its affinity allows.
//!
//! A pile-up can be made by the masks themselves (a start-up script that wrote one CPU into
//! every NIC's `smp_affinity`, or masks confined to one core's two threads). Respecting them
//! is right, but silence is not: the plan says which heavy interrupts are pinned, and what
//! the busiest CPU would carry if they were not (a second plan without the pins). Only an
//! explicit `unpin` moves them. `banned` CPUs (irqbalance's IRQBALANCE_BANNED_CPULIST) take
//! no moved interrupt, and heavy interrupts on them are moved off.
//!
//! Pure: the caller measures and builds the inputs (see `super::inputs`), so every rule here
//! is tested exactly on synthetic loads.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A CPU interrupts may be placed on (online, not isolated) and where it sits.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    pub(crate) cpu: u32,
    pub(crate) package: u32,
    /// `core_id` is unique only within a package.
    pub(crate) core: u32,
    pub(crate) node: u32,
}

/// One numbered interrupt as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub(crate) irq: u32,
    pub(crate) name: String,
    /// Interrupts per second delivered to each CPU over the measured interval.
    pub(crate) per_cpu: BTreeMap<u32, f64>,
    /// CPUs its affinity allows (for an interrupt iolab already moved: the affinity it had
    /// before, so a plan is never narrowed by iolab's own earlier choice).
    pub(crate) allowed: Vec<u32>,
    /// CPUs it is delivered to now (`effective_affinity_list`), used when it had no interrupts.
    pub(crate) effective: Vec<u32>,
    /// NUMA node of its device, when the kernel says.
    pub(crate) node: Option<u32>,
    pub(crate) managed: bool,
}

impl Source {
    pub(crate) fn rate(&self) -> f64 {
        self.per_cpu.values().sum()
    }

    /// The CPU that took most of its interrupts, else the first effective one.
    fn home(&self) -> Option<u32> {
        self.per_cpu
            .iter()
            .filter(|(_, r)| **r > 0.0)
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(c, _)| *c)
            .or_else(|| self.effective.first().copied())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Interrupts per second from which an interrupt counts as heavy.
    pub(crate) heavy: f64,
    /// The least improvement of the load peaks, in percent, worth moving anything for.
    pub(crate) min_gain_pct: f64,
    /// Allow placing an interrupt off its device's NUMA node.
    pub(crate) any_node: bool,
    /// Pinned interrupts the plan may move anyway (their affinity is ignored).
    #[serde(default)]
    pub(crate) unpin: Unpin,
    /// CPUs no interrupt is moved to; heavy interrupts on them are moved off.
    #[serde(default)]
    pub(crate) banned: Vec<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            heavy: 1000.0,
            min_gain_pct: 10.0,
            any_node: false,
            unpin: Unpin::None,
            banned: Vec::new(),
        }
    }
}

impl Options {
    /// An interrupt that never fired is never heavy: moving it changes no load (`--heavy` is
    /// above 0, but a plan file may say 0).
    pub(crate) fn is_heavy(&self, rate: f64) -> bool {
        rate > 0.0 && rate >= self.heavy
    }
}

/// Which pinned interrupts a plan may move.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Unpin {
    /// Pins are respected.
    #[default]
    None,
    /// Every pin is ignored.
    All,
    /// These IRQs' pins are ignored.
    Irqs(Vec<u32>),
}

impl Unpin {
    pub(crate) fn covers(&self, irq: u32) -> bool {
        match self {
            Unpin::None => false,
            Unpin::All => true,
            Unpin::Irqs(list) => list.contains(&irq),
        }
    }
}

/// True when `allowed` confines an interrupt to one core: one CPU, or SMT threads of one
/// core. Such a mask is a pin (a user's or a script's choice), not a fence to balance within;
/// one that allows every CPU that can take interrupts (a machine of one core) is the default.
pub(crate) fn is_pin(allowed: &[u32], slots: &[Slot]) -> bool {
    if slots.len() > 1 && slots.iter().all(|s| allowed.contains(&s.cpu)) {
        return false;
    }
    if allowed.len() == 1 {
        return true;
    }
    let cores: Option<Vec<(u32, u32)>> = allowed
        .iter()
        .map(|c| {
            slots
                .iter()
                .find(|s| s.cpu == *c)
                .map(|s| (s.package, s.core))
        })
        .collect();
    matches!(cores, Some(c) if !c.is_empty() && c.iter().all(|k| *k == c[0]))
}

/// Heavy interrupts whose pins make the pile-up, and what unpinning them would give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Pinned {
    pub(crate) irqs: Vec<u32>,
    /// The CPUs their affinities allow.
    pub(crate) cpus: Vec<u32>,
    /// Their interrupts per second together.
    pub(crate) rate: f64,
    /// The busiest CPU's interrupts per second with the pins (after this plan's moves).
    pub(crate) busiest_cpu: f64,
    /// The same if the plan could move them too.
    pub(crate) busiest_cpu_unpinned: f64,
    /// How much less the busiest CPU would carry unpinned, in percent.
    pub(crate) gain_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Move {
    pub irq: u32,
    pub name: String,
    pub rate: f64,
    /// CPUs it was delivered to during the measurement.
    pub from: Vec<u32>,
    pub to: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Kept {
    pub(crate) irq: u32,
    pub(crate) name: String,
    pub(crate) rate: f64,
    pub(crate) on: Vec<u32>,
    pub(crate) why: String,
}

/// The busiest package, core and CPU, each as interrupts per second per CPU in it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Peaks {
    pub(crate) package: f64,
    pub(crate) core: f64,
    pub(crate) cpu: f64,
}

impl Peaks {
    fn cost(&self) -> f64 {
        self.package + self.core + self.cpu
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub(crate) options: Options,
    pub moves: Vec<Move>,
    /// Interrupts that had interrupts and stay, with the reason.
    pub(crate) kept: Vec<Kept>,
    /// Interrupts per second per placeable CPU, now and after the moves.
    pub(crate) cpu_before: BTreeMap<u32, f64>,
    pub(crate) cpu_after: BTreeMap<u32, f64>,
    pub(crate) peaks_before: Peaks,
    pub(crate) peaks_after: Peaks,
    /// How much the plan lowers the sum of the three peaks, in percent.
    pub(crate) gain_pct: f64,
    /// True when the heavy interrupts are already as well placed as the threshold asks:
    /// nothing moves. False when no movable interrupt is heavy (`nothing_heavy`): there is
    /// nothing to balance, and a busy CPU may still carry many light ones.
    pub(crate) balanced: bool,
    /// True when no movable interrupt is heavy, so the plan moves nothing.
    #[serde(default)]
    pub(crate) nothing_heavy: bool,
    /// Set when pinned heavy interrupts keep the load from being balanced.
    #[serde(default)]
    pub(crate) pinned: Option<Pinned>,
    /// Pinned interrupts this plan unpins (`--unpin`) but keeps where they are. Applying it
    /// writes their affinity as it is through the journal, so later plans treat them as
    /// unpinned, like the ones it moves, and `irq rollback` restores the pin.
    #[serde(default)]
    pub(crate) unpinned_in_place: Vec<u32>,
    /// The CPUs each of those was pinned to when the plan was made: a saved plan applied
    /// later must find the same pin, or it would take a pin made since for the one it saw.
    #[serde(default)]
    pub(crate) pins_seen: BTreeMap<u32, Vec<u32>>,
    /// Moves off the interrupt's device's node, each with why no CPU of that node could take
    /// it (without `--any-node`, the node's CPUs are tried first).
    #[serde(default)]
    pub(crate) off_node: BTreeMap<u32, String>,
    /// Banned CPUs that exist but are offline now (banned should they come online).
    #[serde(default)]
    pub(crate) banned_offline: Vec<u32>,
    /// Heavy interrupts were measured on CPUs that are to take none (banned, isolated,
    /// nohz_full): they move off whatever the gain.
    #[serde(default)]
    pub(crate) forced: bool,
}

/// Plans the placement of `sources` over `slots`, and says when pins keep the load unbalanced.
pub fn plan(sources: &[Source], slots: &[Slot], options: Options) -> Plan {
    let mut p = plan_within(sources, slots, options.clone());
    // Heavy interrupts whose masks pin them and that this plan may not move.
    let pinned: Vec<&Source> = sources
        .iter()
        .filter(|s| !s.managed && options.is_heavy(s.rate()) && !options.unpin.covers(s.irq))
        .filter(|s| is_pin(&s.allowed, slots))
        .collect();
    if pinned.is_empty() {
        return p;
    }
    let free = plan_within(
        sources,
        slots,
        Options {
            unpin: Unpin::All,
            ..options
        },
    );
    let moves_a_pin = free
        .moves
        .iter()
        .any(|m| pinned.iter().any(|s| s.irq == m.irq));
    let (with, without) = (p.peaks_after.cpu, free.peaks_after.cpu);
    if moves_a_pin && !free.balanced && without < with {
        let mut cpus: Vec<u32> = pinned.iter().flat_map(|s| s.allowed.clone()).collect();
        cpus.sort_unstable();
        cpus.dedup();
        p.pinned = Some(Pinned {
            irqs: pinned.iter().map(|s| s.irq).collect(),
            cpus,
            rate: pinned.iter().map(|s| s.rate()).sum(),
            busiest_cpu: with,
            busiest_cpu_unpinned: without,
            gain_pct: (with - without) / with * 100.0,
        });
    }
    p
}

/// The plan with the pins `options` allows to move ignored, the others respected.
fn plan_within(sources: &[Source], slots: &[Slot], options: Options) -> Plan {
    let placeable = |c: &u32| slots.iter().any(|s| s.cpu == *c);
    let takes_moves = |c: &u32| placeable(c) && !options.banned.contains(c);
    let all: Vec<u32> = slots.iter().map(|s| s.cpu).collect();
    let mut fixed: BTreeMap<u32, f64> = slots.iter().map(|s| (s.cpu, 0.0)).collect();
    // CPUs kept quiet on purpose (isolated, nohz_full) that took interrupts anyway: their
    // load counts in the busiest CPU, and heavy interrupts on them leave (below).
    for src in sources {
        for (cpu, _) in src.per_cpu.iter().filter(|(_, r)| **r > 0.0) {
            fixed.entry(*cpu).or_insert(0.0);
        }
    }
    let mut before = fixed.clone();
    // Each heavy interrupt with the CPUs it may go to, and why they are off its node if they are.
    let mut heavy: Vec<(&Source, Vec<u32>, Option<String>)> = Vec::new();
    let mut kept = Vec::new();
    for src in sources {
        for (cpu, r) in &src.per_cpu {
            if let Some(b) = before.get_mut(cpu) {
                *b += r;
            }
        }
        let rate = src.rate();
        // `--unpin` lifts pins; any other mask is a fence the plan stays inside.
        let pin = is_pin(&src.allowed, slots);
        let unpinned = options.unpin.covers(src.irq) && !src.managed && pin;
        let mask = if unpinned { &all } else { &src.allowed };
        let allowed: Vec<u32> = mask.iter().copied().filter(takes_moves).collect();
        let why = if src.managed {
            Some("managed by the kernel".to_string())
        } else if src.allowed.is_empty() {
            Some("its affinity could not be read".into())
        } else if src.allowed.len() == 1 && !unpinned {
            // A pin to one core's threads is kept on them, balanced between them.
            Some(format!("pinned to CPU {} by its affinity", src.allowed[0]))
        } else if !options.is_heavy(rate) {
            Some(format!("light (under {}/s)", options.heavy))
        } else if allowed.is_empty() && mask.iter().all(placeable) {
            Some("its affinity allows only banned CPUs".into())
        } else if allowed.is_empty() && mask.iter().any(placeable) {
            Some(
                "its affinity allows only banned CPUs and CPUs that take no interrupts \
                 (offline or isolated)"
                    .into(),
            )
        } else if allowed.is_empty() {
            Some("no CPU its affinity allows can take interrupts (offline or isolated)".into())
        } else {
            None
        };
        match why {
            Some(why) => {
                for (cpu, r) in &src.per_cpu {
                    if let Some(f) = fixed.get_mut(cpu) {
                        *f += r;
                    }
                }
                if rate > 0.0 {
                    kept.push(kept_entry(src, why));
                }
            }
            None => {
                let (cands, off_node) = candidates(src, mask, allowed, slots, options.any_node);
                heavy.push((src, cands, off_node));
            }
        }
    }
    // Biggest first: each lands where it raises the peaks least.
    heavy.sort_by(|a, b| {
        b.0.rate()
            .total_cmp(&a.0.rate())
            .then(a.0.irq.cmp(&b.0.irq))
    });
    let mut after = fixed;
    let mut chosen = Vec::with_capacity(heavy.len());
    for (src, cands, _) in &heavy {
        let rate = src.rate();
        let home = src.home();
        let best = cands
            .iter()
            .copied()
            .min_by(|&a, &b| {
                let key = |c: u32| score_with(&after, slots, c, rate);
                close_cmp(key(a), key(b))
                    .then((Some(a) != home).cmp(&(Some(b) != home)))
                    .then(a.cmp(&b))
            })
            .expect("a heavy source has a candidate");
        *after.get_mut(&best).expect("candidates are slots") += rate;
        chosen.push(best);
    }
    // Heavy interrupts on a banned CPU, or on one kept quiet, leave it whatever the gain.
    let off_limits = |c: &u32| options.banned.contains(c) || !placeable(c);
    let on_banned = heavy
        .iter()
        .any(|(src, _, _)| on_cpus(src).iter().any(off_limits));
    // Where each goes; None: it stays where it is.
    let greedy: Vec<Option<u32>> = heavy
        .iter()
        .zip(chosen)
        .map(|((src, _, _), to)| (on_cpus(src) != [to]).then_some(to))
        .collect();
    // The greedy placement re-places every heavy interrupt, so one moved by hand gave five
    // moves (a rotation and a swap) where one did nearly as well. A heavy interrupt leaves its
    // CPU only when that is worth --min-gain of its rate: the plan with the fewest moves is
    // taken unless the greedy one's extra moves lower the peaks by more than that.
    let frac = options.min_gain_pct / 100.0;
    let (few, few_load) = fewest_moves(&heavy, &before, slots, frac);
    let (moved_greedy, moved_few) = (moved_rate(&heavy, &greedy), moved_rate(&heavy, &few));
    let extra = peaks(&few_load, slots).cost() - peaks(&after, slots).cost();
    let (targets, after) = if !on_banned
        && moved_few.0 < moved_greedy.0
        && extra <= frac * (moved_greedy.1 - moved_few.1)
    {
        (few, few_load)
    } else {
        (greedy, after)
    };
    let peaks_before = peaks(&before, slots);
    let peaks_after = peaks(&after, slots);
    let gain_pct = if peaks_before.cost() > 0.0 {
        (peaks_before.cost() - peaks_after.cost()) / peaks_before.cost() * 100.0
    } else {
        0.0
    };
    let nothing_heavy = heavy.is_empty();
    let balanced = !nothing_heavy && gain_pct < options.min_gain_pct && !on_banned;
    let mut moves = Vec::new();
    let mut unpinned_in_place = Vec::new();
    let mut pins_seen = BTreeMap::new();
    let mut off_node = BTreeMap::new();
    for ((src, _, off), to) in heavy.iter().zip(targets) {
        let from: Vec<u32> = on_cpus(src);
        if !balanced && to.is_none() && options.unpin.covers(src.irq) && is_pin(&src.allowed, slots)
        {
            unpinned_in_place.push(src.irq);
            pins_seen.insert(src.irq, src.allowed.clone());
        }
        let Some(to) = to.filter(|_| !balanced) else {
            let why = if balanced {
                "balanced: moving would not lower the peaks enough".to_string()
            } else {
                "already well placed".to_string()
            };
            kept.push(kept_entry(src, why));
            continue;
        };
        if let Some(why) = off {
            off_node.insert(src.irq, why.clone());
        }
        moves.push(Move {
            irq: src.irq,
            name: src.name.clone(),
            rate: src.rate(),
            from,
            to,
        });
    }
    kept.sort_by(|a, b| b.rate.total_cmp(&a.rate).then(a.irq.cmp(&b.irq)));
    Plan {
        options,
        moves,
        kept,
        cpu_after: if balanced { before.clone() } else { after },
        peaks_after: if balanced { peaks_before } else { peaks_after },
        cpu_before: before,
        peaks_before,
        gain_pct: if balanced { 0.0 } else { gain_pct },
        balanced,
        nothing_heavy,
        pinned: None,
        unpinned_in_place,
        pins_seen,
        off_node,
        banned_offline: Vec::new(),
        forced: on_banned,
    }
}

/// The heavy interrupts (`plan_within`'s list) moved from where they were measured, one at a
/// time, each time the move that lowers the peaks most, while that is by more than `frac` of
/// the moved interrupt's rate; each moves once at most. Only interrupts on the busiest CPU,
/// core or package are tried: moving another lowers no peak. Where each goes (None: it stays),
/// and the load then.
fn fewest_moves(
    heavy: &[(&Source, Vec<u32>, Option<String>)],
    before: &BTreeMap<u32, f64>,
    slots: &[Slot],
    frac: f64,
) -> (Vec<Option<u32>>, BTreeMap<u32, f64>) {
    let mut load = before.clone();
    let mut to = vec![None; heavy.len()];
    loop {
        let now = peaks(&load, slots);
        let busiest: Vec<u32> = slots
            .iter()
            .filter(|s| {
                let [package, core, cpu] = score_with(&load, slots, s.cpu, 0.0);
                let top = |x: f64, peak: f64| x >= peak - 1e-9 * peak.max(1.0);
                top(package, now.package) || top(core, now.core) || top(cpu, now.cpu)
            })
            .map(|s| s.cpu)
            .collect();
        // The move that lowers the peaks most; of equal ones, the one onto the least loaded
        // CPU (onto a CPU already busy, it only passes the peak on, and the next move has to
        // take it off again: three moves where two did).
        let mut best: Option<([f64; 2], usize, u32)> = None;
        for (i, (src, cands, _)) in heavy.iter().enumerate() {
            if to[i].is_some() || !src.per_cpu.keys().any(|c| busiest.contains(c)) {
                continue;
            }
            for &c in cands.iter().filter(|c| on_cpus(src) != [**c]) {
                let gain = now.cost() - peaks(&moved(&load, src, c), slots).cost();
                let key = [-gain, load[&c]];
                let better = |b: &([f64; 2], usize, u32)| {
                    close_cmp([key[0], key[1], 0.0], [b.0[0], b.0[1], 0.0]) == Ordering::Less
                };
                if gain > frac * src.rate() && best.as_ref().is_none_or(better) {
                    best = Some((key, i, c));
                }
            }
        }
        let Some((_, i, c)) = best else {
            return (to, load);
        };
        load = moved(&load, heavy[i].0, c);
        to[i] = Some(c);
    }
}

/// `load` with `src` taken off the CPUs it was measured on and put on `cpu`.
fn moved(load: &BTreeMap<u32, f64>, src: &Source, cpu: u32) -> BTreeMap<u32, f64> {
    let mut out = load.clone();
    for (c, r) in &src.per_cpu {
        if let Some(l) = out.get_mut(c) {
            *l -= r;
        }
    }
    *out.get_mut(&cpu).expect("candidates are slots") += src.rate();
    out
}

/// How many of the heavy interrupts `targets` moves, and their rate together.
fn moved_rate(
    heavy: &[(&Source, Vec<u32>, Option<String>)],
    targets: &[Option<u32>],
) -> (usize, f64) {
    heavy
        .iter()
        .zip(targets)
        .filter(|(_, to)| to.is_some())
        .fold((0, 0.0), |(n, rate), ((src, _, _), _)| {
            (n + 1, rate + src.rate())
        })
}

fn kept_entry(src: &Source, why: String) -> Kept {
    Kept {
        irq: src.irq,
        name: src.name.clone(),
        rate: src.rate(),
        on: on_cpus(src),
        why,
    }
}

/// CPUs that took its interrupts, else where it is delivered.
fn on_cpus(src: &Source) -> Vec<u32> {
    let on: Vec<u32> = src
        .per_cpu
        .iter()
        .filter(|(_, r)| **r > 0.0)
        .map(|(c, _)| *c)
        .collect();
    if on.is_empty() {
        src.effective.clone()
    } else {
        on
    }
}

/// The allowed CPUs, narrowed to the device's node when it has any of them; when it has none,
/// all of them, with why none of the node's (`mask` is what the affinity allows).
fn candidates(
    src: &Source,
    mask: &[u32],
    allowed: Vec<u32>,
    slots: &[Slot],
    any_node: bool,
) -> (Vec<u32>, Option<String>) {
    let Some(node) = src.node.filter(|_| !any_node) else {
        return (allowed, None);
    };
    let on_node = |c: &u32| slots.iter().any(|s| s.cpu == *c && s.node == node);
    let local: Vec<u32> = allowed.iter().copied().filter(on_node).collect();
    if !local.is_empty() {
        return (local, None);
    }
    let why = if !slots.iter().any(|s| s.node == node) {
        format!("no CPU of its device's node {node} can take interrupts (offline or isolated)")
    } else if !mask.iter().any(on_node) {
        format!("its affinity allows no CPU of its device's node {node}")
    } else {
        format!("every CPU of its device's node {node} that its affinity allows is banned")
    };
    (allowed, Some(why))
}

/// Package, core and CPU load per CPU if `rate` were added on `cpu`.
fn score_with(load: &BTreeMap<u32, f64>, slots: &[Slot], cpu: u32, rate: f64) -> [f64; 3] {
    let me = slots.iter().find(|s| s.cpu == cpu).expect("a slot");
    let per_cpu = |same: &dyn Fn(&Slot) -> bool| {
        let members: Vec<&Slot> = slots.iter().filter(|s| same(s)).collect();
        let sum: f64 = members.iter().map(|s| load[&s.cpu]).sum();
        (sum + rate) / members.len() as f64
    };
    [
        per_cpu(&|s| s.package == me.package),
        per_cpu(&|s| s.package == me.package && s.core == me.core),
        load[&cpu] + rate,
    ]
}

fn peaks(load: &BTreeMap<u32, f64>, slots: &[Slot]) -> Peaks {
    let peak = |key: &dyn Fn(&Slot) -> (u32, u32)| {
        let mut groups: BTreeMap<(u32, u32), (f64, usize)> = BTreeMap::new();
        for s in slots {
            let g = groups.entry(key(s)).or_default();
            g.0 += load[&s.cpu];
            g.1 += 1;
        }
        groups
            .values()
            .map(|(sum, n)| sum / *n as f64)
            .fold(0.0, f64::max)
    };
    Peaks {
        package: peak(&|s| (s.package, 0)),
        core: peak(&|s| (s.package, s.core)),
        // Over every CPU measured: one kept quiet that took interrupts is the busiest too.
        cpu: load.values().copied().fold(0.0, f64::max),
    }
}

/// Lexicographic comparison that treats values within rounding of each other as equal, so
/// that an exact tie in load is decided by "stay where it is", not by float noise.
fn close_cmp(a: [f64; 3], b: [f64; 3]) -> Ordering {
    for (x, y) in a.iter().zip(&b) {
        let tol = 1e-9 * x.abs().max(y.abs()).max(1.0);
        if (x - y).abs() > tol {
            return x.total_cmp(y);
        }
    }
    Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two packages, two cores each, two SMT threads per core: CPUs 0-3 are package 0 (core
    /// of CPU c is c % 2, siblings c and c + 2), CPUs 4-7 package 1; one node.
    fn box8() -> Vec<Slot> {
        (0..8)
            .map(|cpu| Slot {
                cpu,
                package: cpu / 4,
                core: cpu % 2,
                node: 0,
            })
            .collect()
    }

    fn src(irq: u32, on: &[(u32, f64)], allowed: &[u32]) -> Source {
        Source {
            irq,
            name: format!("dev{irq}"),
            per_cpu: on.iter().copied().collect(),
            allowed: allowed.to_vec(),
            effective: on.first().map(|(c, _)| vec![*c]).unwrap_or_default(),
            node: None,
            managed: false,
        }
    }

    const ALL: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7];

    fn moved(p: &Plan) -> Vec<(u32, u32)> {
        p.moves.iter().map(|m| (m.irq, m.to)).collect()
    }

    #[test]
    fn heavy_interrupts_on_one_cpu_spread_packages_then_cores_then_siblings() {
        let sources: Vec<Source> = (0..4)
            .map(|i| src(40 + i, &[(0, 10_000.0 - i as f64)], ALL))
            .collect();
        let p = plan(&sources, &box8(), Options::default());
        // The biggest stays home; the rest go one to each idle core, the other package's
        // first; never to an SMT sibling of a busy core while a core is idle.
        assert_eq!(moved(&p), vec![(41, 4), (42, 5), (43, 1)]);
        assert!(!p.balanced);
        assert_eq!(p.peaks_before.cpu, 39_994.0);
        assert_eq!(p.peaks_after.cpu, 10_000.0);
        assert!(p.gain_pct > 50.0);
        assert_eq!(p.cpu_after[&4], 9_999.0);
        assert_eq!(p.kept[0].why, "already well placed");
    }

    #[test]
    fn a_balanced_load_moves_nothing_and_a_plan_is_a_fixed_point() {
        let sources: Vec<Source> = (0..4).map(|i| src(40 + i, &[(0, 10_000.0)], ALL)).collect();
        let first = plan(&sources, &box8(), Options::default());
        // Apply the plan to the measurement, then plan again: nothing more to do.
        let after: Vec<Source> = sources
            .iter()
            .map(|s| match first.moves.iter().find(|m| m.irq == s.irq) {
                Some(m) => src(s.irq, &[(m.to, s.rate())], ALL),
                None => s.clone(),
            })
            .collect();
        let second = plan(&after, &box8(), Options::default());
        assert!(second.moves.is_empty(), "{:?}", second.moves);
        assert!(second.balanced);
        assert_eq!(second.cpu_after, second.cpu_before);
    }

    #[test]
    fn a_single_heavy_interrupt_is_not_moved_for_nothing() {
        let p = plan(
            &[src(40, &[(3, 50_000.0)], ALL)],
            &box8(),
            Options::default(),
        );
        assert!(p.moves.is_empty());
        assert!(p.balanced);
    }

    /// With no heavy interrupt there is nothing to balance: the plan says so, not "balanced"
    /// (a CPU under 8 light interrupts read as balanced).
    #[test]
    fn a_load_with_nothing_heavy_is_not_called_balanced() {
        let light: Vec<Source> = (0..8).map(|i| src(40 + i, &[(0, 500.0)], ALL)).collect();
        let p = plan(&light, &box8(), Options::default());
        assert!(p.moves.is_empty());
        assert!(p.nothing_heavy && !p.balanced, "{p:?}");
        let heavy = plan(&pinned_four(ALL)[..1], &box8(), Options::default());
        assert!(heavy.balanced && !heavy.nothing_heavy, "{heavy:?}");
    }

    /// With `heavy` 0 (a plan file may say so), interrupts that never fired were moved: pure
    /// churn. They are never heavy.
    #[test]
    fn an_interrupt_that_never_fired_is_never_heavy() {
        let mut silent = src(41, &[], ALL);
        silent.effective = vec![0];
        let sources = vec![src(40, &[(0, 10.0)], ALL), silent];
        let p = plan(
            &sources,
            &box8(),
            Options {
                heavy: 0.0,
                min_gain_pct: 0.0,
                ..Options::default()
            },
        );
        assert!(p.moves.iter().all(|m| m.irq != 41), "{:?}", p.moves);
    }

    /// ht4 in the audit (4 packages of one core's 2 threads, CPUs 2p and 2p+1), balanced one
    /// NIC interrupt to a CPU, until an admin pinned IRQ 36 to CPU 5 beside 38. The greedy plan
    /// made five moves (33 4->2, 35 7->4, 29 1->3, 38 5->7, 32 3->1) for a 33.8% gain where
    /// moving 38 to the empty CPU 2 alone gains 31.6%.
    #[test]
    fn one_interrupt_moved_by_hand_gives_one_move_not_five() {
        let ht4: Vec<Slot> = box8()
            .into_iter()
            .map(|s| Slot {
                package: s.cpu / 2,
                core: 0,
                ..s
            })
            .collect();
        let heavy_50 = Options {
            heavy: 50.0,
            ..Options::default()
        };
        let sources = vec![
            src(39, &[(0, 170.0)], ALL),
            src(29, &[(1, 121.0)], ALL),
            src(32, &[(3, 111.0)], ALL),
            src(33, &[(4, 150.0)], ALL),
            src(36, &[(5, 149.0)], &[5]),
            src(38, &[(5, 119.0)], ALL),
            src(30, &[(6, 166.0)], ALL),
            src(35, &[(7, 127.0)], ALL),
        ];
        let p = plan(&sources, &ht4, heavy_50.clone());
        assert_eq!(moved(&p), vec![(38, 2)]);
        assert_eq!(p.peaks_before.cost(), 686.0);
        assert_eq!(p.peaks_after.cost(), 469.0);
        // Applied, the next plan moves nothing.
        let after: Vec<Source> = sources
            .iter()
            .map(|s| match s.irq {
                38 => src(38, &[(2, 119.0)], ALL),
                _ => s.clone(),
            })
            .collect();
        let again = plan(&after, &ht4, heavy_50);
        assert!(again.moves.is_empty(), "{:?}", again.moves);
    }

    #[test]
    fn small_gains_below_the_threshold_are_not_worth_a_move() {
        // 10k + 1k on CPU 0 against 10k on CPU 4: moving the 1k lowers the peaks a little.
        let sources = vec![
            src(40, &[(0, 10_000.0)], ALL),
            src(41, &[(0, 1_000.0)], ALL),
            src(42, &[(4, 10_000.0)], ALL),
        ];
        let lax = plan(&sources, &box8(), Options::default());
        assert!(lax.balanced, "gain {}", lax.gain_pct);
        let eager = plan(
            &sources,
            &box8(),
            Options {
                min_gain_pct: 0.5,
                ..Options::default()
            },
        );
        assert_eq!(moved(&eager), vec![(41, 1)]);
    }

    #[test]
    fn managed_pinned_light_and_fenced_interrupts_are_respected() {
        let mut managed = src(50, &[(0, 30_000.0)], ALL);
        managed.managed = true;
        let pinned = src(51, &[(0, 20_000.0)], &[0]);
        let light = src(52, &[(0, 500.0)], ALL);
        // Allowed only on package 0's CPUs 0 and 2 (siblings): stays in that fence.
        let fenced = src(53, &[(0, 20_000.0)], &[0, 2]);
        let p = plan(
            &[managed, pinned, light, fenced],
            &box8(),
            Options::default(),
        );
        assert_eq!(moved(&p), vec![(53, 2)]);
        let why: BTreeMap<u32, &str> = p.kept.iter().map(|k| (k.irq, k.why.as_str())).collect();
        assert_eq!(why[&50], "managed by the kernel");
        assert_eq!(why[&51], "pinned to CPU 0 by its affinity");
        assert!(why[&52].starts_with("light"));
        // Fixed load counts: CPU 0 carries the managed, pinned and light interrupts.
        assert_eq!(p.cpu_after[&0], 50_500.0);
    }

    /// `box8` with each package a node: node 1 is CPUs 4-7.
    fn box8_two_nodes() -> Vec<Slot> {
        box8()
            .into_iter()
            .map(|s| Slot {
                node: s.package,
                ..s
            })
            .collect()
    }

    /// `n` heavy interrupts (IRQ 60 on) of a device on node 1, all on CPU 4.
    fn node1_pileup(n: u32) -> Vec<Source> {
        (0..n)
            .map(|i| {
                let mut s = src(60 + i, &[(4, 10_000.0 - i as f64)], ALL);
                s.node = Some(1);
                s
            })
            .collect()
    }

    #[test]
    fn interrupts_stay_on_their_devices_node_and_off_isolated_cpus() {
        // CPU 7 is isolated (not a slot).
        let slots: Vec<Slot> = box8_two_nodes()
            .into_iter()
            .filter(|s| s.cpu != 7)
            .collect();
        let sources = node1_pileup(4);
        let p = plan(&sources, &slots, Options::default());
        // CPUs 4 and 6 are one core's two threads: one of them carries two, CPU 5's core
        // one. Two stay on CPU 4: two moves give the loads three would.
        assert_eq!(moved(&p), vec![(60, 5), (61, 6)]);
        let anywhere = plan(
            &sources,
            &slots,
            Options {
                any_node: true,
                ..Options::default()
            },
        );
        // Package 0 has four idle CPUs to package 1's three: the biggest goes there.
        assert_eq!(moved(&anywhere), vec![(60, 0), (62, 1), (63, 5)]);
        let isolated_only = src(64, &[(7, 5_000.0)], &[7]);
        let q = plan(&[isolated_only], &slots, Options::default());
        assert!(q.moves.is_empty());
        assert!(q.kept[0].why.starts_with("pinned"));
    }

    /// Four heavy interrupts on CPU 0, each with affinity `allowed`.
    fn pinned_four(allowed: &[u32]) -> Vec<Source> {
        (0..4)
            .map(|i| src(40 + i, &[(0, 10_000.0 - i as f64)], allowed))
            .collect()
    }

    #[test]
    fn pins_that_pile_heavy_interrupts_up_are_named_with_the_gain_of_unpinning() {
        let p = plan(&pinned_four(&[0]), &box8(), Options::default());
        assert!(p.moves.is_empty(), "pins are respected: {:?}", p.moves);
        let pin = p.pinned.expect("the pins are the problem");
        assert_eq!(pin.irqs, vec![40, 41, 42, 43]);
        assert_eq!(pin.cpus, vec![0]);
        assert_eq!(pin.rate, 39_994.0);
        assert_eq!(pin.busiest_cpu, 39_994.0);
        // Unpinned, the four go one to a core: the busiest CPU carries the biggest alone.
        assert_eq!(pin.busiest_cpu_unpinned, 10_000.0);
        assert!((pin.gain_pct - 74.996).abs() < 0.01, "{}", pin.gain_pct);
        // A lone pinned interrupt is no pile-up: moving it would gain nothing.
        let one = plan(&pinned_four(&[0])[..1], &box8(), Options::default());
        assert_eq!(one.pinned, None);
    }

    /// Three heavy interrupts on CPU 0 and one on CPU 1: two moves, onto idle CPUs, balance
    /// them. The first move went to CPU 1 (as good for the peaks at that step), and the
    /// interrupt there had to move on: three moves, against the rule that one interrupt
    /// leaves its CPU only when that lowers it.
    #[test]
    fn of_equal_moves_the_one_onto_an_idle_cpu_is_taken() {
        let sources = vec![
            src(80, &[(0, 10_000.0)], &[0, 1, 2, 3]),
            src(81, &[(0, 10_000.0)], &[0, 1, 2, 3]),
            src(82, &[(0, 10_000.0)], &[0, 1, 2, 3]),
            src(83, &[(1, 10_000.0)], &[0, 1, 2, 3]),
        ];
        let p = plan(&sources, &box8(), Options::default());
        assert_eq!(p.moves.len(), 2, "{:?}", p.moves);
        assert!(
            p.moves.iter().all(|m| [2, 3].contains(&m.to)),
            "{:?}",
            p.moves
        );
        assert_eq!(p.peaks_after.cpu, 10_000.0);
    }

    /// Isolated and nohz_full CPUs are no slots. Heavy interrupts measured on one left it
    /// whatever the gain (as off a banned CPU), and it counts as the busiest CPU: the plan had
    /// called the machine balanced, its busiest CPU at 0/s.
    #[test]
    fn heavy_interrupts_on_a_cpu_kept_quiet_are_moved_off() {
        let sources = vec![
            src(70, &[(8, 20_000.0)], &[4, 5, 8]),
            src(71, &[(8, 20_000.0)], &[4, 5, 8]),
            src(72, &[(8, 50.0)], &[4, 5, 8]),
        ];
        let p = plan(&sources, &box8(), Options::default());
        assert!(!p.balanced && !p.nothing_heavy);
        let mut to: Vec<u32> = moved(&p).iter().map(|m| m.1).collect();
        to.sort_unstable();
        assert_eq!(to, vec![4, 5]);
        assert_eq!(p.peaks_before.cpu, 40_050.0);
        assert_eq!(p.cpu_before[&8], 40_050.0);
        // The light one stays: the quiet CPU keeps its load.
        assert_eq!(p.cpu_after[&8], 50.0);
        assert!(p.gain_pct > 0.0, "{}", p.gain_pct);
        assert!(p.forced);
        let text = super::super::render::plan_text(&p, 2.0);
        assert!(
            text.contains("lower; moves off CPUs that are to take none need no gain)"),
            "{text}"
        );
        // With nowhere else to go, it stays, and says why; nothing moves, and not because
        // nothing is heavy.
        let stuck = vec![src(73, &[(8, 20_000.0)], &[8, 9])];
        let p = plan(&stuck, &box8(), Options::default());
        assert!(p.moves.is_empty());
        assert_eq!(
            p.kept[0].why,
            "no CPU its affinity allows can take interrupts (offline or isolated)"
        );
        assert_eq!(
            super::super::render::why_nothing_moves(&p),
            "no heavy interrupt can be moved (why: under kept)"
        );
        // Only banned CPUs and a quiet one in its mask.
        let unread = plan(
            &[src(75, &[(2, 20_000.0)], &[])],
            &box8(),
            Options::default(),
        );
        assert_eq!(unread.kept[0].why, "its affinity could not be read");
        let p = plan(
            &[src(74, &[(8, 20_000.0)], &[3, 8])],
            &box8(),
            Options {
                banned: vec![3],
                ..Options::default()
            },
        );
        assert_eq!(
            p.kept[0].why,
            "its affinity allows only banned CPUs and CPUs that take no interrupts (offline or \
             isolated)"
        );
    }

    #[test]
    fn masks_confined_to_one_cores_threads_are_pins_too() {
        // CPUs 0 and 2 are one core's two threads in box8.
        assert!(is_pin(&[0, 2], &box8()));
        assert!(!is_pin(&[0, 1], &box8()));
        assert!(!is_pin(&[0, 4], &box8()));
        // Every CPU of a machine of one core (two threads) is its default, no pin.
        let one_core: Vec<Slot> = box8()
            .into_iter()
            .filter(|s| [0, 2].contains(&s.cpu))
            .collect();
        assert!(!is_pin(&[0, 2], &one_core));
        assert!(is_pin(&[2], &one_core));
        let p = plan(&pinned_four(&[0, 2]), &box8(), Options::default());
        // Balanced within the mask (two on each thread) ...
        assert_eq!(moved(&p), vec![(41, 2), (42, 2)]);
        // ... and the mask is named as what keeps the busiest CPU at two interrupts' load.
        let pin = p.pinned.expect("the mask is the problem");
        assert_eq!(pin.cpus, vec![0, 2]);
        assert_eq!(pin.busiest_cpu, 19_997.0);
        assert_eq!(pin.busiest_cpu_unpinned, 10_000.0);
    }

    #[test]
    fn unpin_moves_all_or_the_named_pinned_interrupts() {
        let sources = pinned_four(&[0]);
        let all = plan(
            &sources,
            &box8(),
            Options {
                unpin: Unpin::All,
                ..Options::default()
            },
        );
        // As if unpinned: across packages, then cores.
        assert_eq!(moved(&all), vec![(41, 4), (42, 5), (43, 1)]);
        assert_eq!(all.pinned, None);
        let one = plan(
            &sources,
            &box8(),
            Options {
                unpin: Unpin::Irqs(vec![42]),
                ..Options::default()
            },
        );
        assert_eq!(moved(&one), vec![(42, 4)]);
        // The others are still pinned, and unpinning them would still help.
        assert_eq!(
            one.pinned.expect("three pins remain").irqs,
            vec![40, 41, 43]
        );
        // `--unpin` lifts pins only: a wider mask named in it is still kept to.
        let fenced = vec![
            src(60, &[(0, 10_000.0)], &[0, 1, 4]),
            src(61, &[(0, 10_000.0)], &[0, 1, 4]),
            src(62, &[(0, 10_000.0)], &[0, 1, 4]),
        ];
        for unpin in [Unpin::All, Unpin::Irqs(vec![60, 61, 62])] {
            let p = plan(
                &fenced,
                &box8(),
                Options {
                    unpin,
                    ..Options::default()
                },
            );
            assert!(
                p.moves.iter().all(|m| [0, 1, 4].contains(&m.to)),
                "{:?}",
                p.moves
            );
            assert!(!p.moves.is_empty());
        }
        // Managed interrupts stay managed whatever --unpin says.
        let mut managed = sources.clone();
        for s in &mut managed {
            s.managed = true;
        }
        let m = plan(
            &managed,
            &box8(),
            Options {
                unpin: Unpin::All,
                ..Options::default()
            },
        );
        assert!(m.moves.is_empty() && m.pinned.is_none());
    }

    /// The biggest of four pinned interrupts stays on its CPU when all are unpinned: the plan
    /// names it, so applying it journals it as unpinned too (not left a user's pin).
    #[test]
    fn a_pinned_interrupt_unpinned_but_kept_where_it_is_is_named() {
        let all = Options {
            unpin: Unpin::All,
            ..Options::default()
        };
        let p = plan(&pinned_four(&[0]), &box8(), all.clone());
        assert_eq!(moved(&p), vec![(41, 4), (42, 5), (43, 1)]);
        assert_eq!(p.unpinned_in_place, vec![40]);
        // With the pin it saw, which applying it later checks is still the one there.
        assert_eq!(p.pins_seen, BTreeMap::from([(40, vec![0])]));
        // A plan saved by an iolab that kept no pins still loads (and is taken as is).
        let mut saved = serde_json::to_value(&p).unwrap();
        saved.as_object_mut().unwrap().remove("pins_seen");
        let loaded: Plan = serde_json::from_value(saved).unwrap();
        assert!(loaded.pins_seen.is_empty() && loaded.unpinned_in_place == vec![40]);
        // Not pinned, it needs no taking over.
        assert!(plan(&pinned_four(ALL), &box8(), all)
            .unpinned_in_place
            .is_empty());
    }

    /// Banning every CPU of a device's node sent its interrupts to another node without a word.
    #[test]
    fn a_move_off_the_devices_node_says_why() {
        let slots = box8_two_nodes();
        let sources = node1_pileup(2);
        let banned = Options {
            banned: vec![4, 5, 6, 7],
            ..Options::default()
        };
        let p = plan(&sources, &slots, banned);
        assert_eq!(p.moves.len(), 2, "{:?}", p.moves);
        let why = "every CPU of its device's node 1 that its affinity allows is banned";
        assert_eq!(p.off_node.get(&60).map(String::as_str), Some(why));
        assert_eq!(p.off_node.get(&61).map(String::as_str), Some(why));
        let text = super::super::render::plan_text(&p, 1.0);
        assert!(
            text.contains(&format!("IRQ 60 goes off its device's node: {why}")),
            "{text}"
        );
        // Within the node: nothing to say.
        assert!(plan(&sources, &slots, Options::default())
            .off_node
            .is_empty());
    }

    #[test]
    fn banned_cpus_take_no_moved_interrupt_and_heavy_ones_leave_them() {
        let banned = Options {
            banned: vec![0, 4, 5],
            ..Options::default()
        };
        let sources: Vec<Source> = (0..4)
            .map(|i| src(40 + i, &[(0, 10_000.0 - i as f64)], ALL))
            .collect();
        let p = plan(&sources, &box8(), banned.clone());
        // Every one leaves banned CPU 0 (even the biggest), none lands on 0, 4 or 5.
        assert_eq!(p.moves.len(), 4, "{:?}", p.moves);
        assert!(
            p.moves.iter().all(|m| ![0, 4, 5].contains(&m.to)),
            "{:?}",
            p.moves
        );
        // A balanced load still leaves a banned CPU: one heavy interrupt each on CPUs 0 and 6.
        let calm = vec![
            src(40, &[(0, 10_000.0)], ALL),
            src(41, &[(6, 10_000.0)], ALL),
        ];
        assert!(plan(&calm, &box8(), Options::default()).moves.is_empty());
        let off = plan(&calm, &box8(), banned.clone());
        assert_eq!(moved(&off), vec![(40, 1)]);
        // An interrupt its affinity keeps on banned CPUs only stays, and says why.
        let fenced = plan(&[src(40, &[(4, 10_000.0)], &[4, 5])], &box8(), banned);
        assert!(fenced.moves.is_empty());
        assert_eq!(fenced.kept[0].why, "its affinity allows only banned CPUs");
    }
}

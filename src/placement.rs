//! Where to pin the I/O generator relative to the CPU that takes the device's interrupt
//! (case 0: "IO on", "IO near", "IO far"). The words only mean something against a
//! topology, so this module turns a placement level into a CPU list for one machine, or says
//! plainly why the level cannot be realised here (a one-node VM has nothing "far").
//!
//! Pure: it sees the topology through `CpuPlace` and the node distance table, never /sys.

use std::collections::BTreeSet;
use std::fmt;

use crate::sys::parse::{cpulist, format_cpulist as format_cpu_list};

/// What placement needs to know about one online CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CpuPlace {
    pub(crate) cpu: u32,
    /// Core id, unique only within its package.
    pub(crate) core: u32,
    pub(crate) package: u32,
    pub(crate) node: u32,
    /// An id of the last-level cache this CPU uses, when the kernel exposes one.
    pub(crate) llc: Option<u32>,
}

/// A placement level as written in an experiment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// The CPU(s) that take the device's interrupt.
    On,
    /// Other CPUs close to it: same last-level cache, else same package, else (on a machine
    /// of several NUMA nodes) same node; the anchor's own core (SMT siblings) only when
    /// nothing else is close.
    Near,
    /// CPUs as far as the topology allows: the most distant NUMA node, else another package,
    /// else another last-level cache; never a CPU that `near` takes (see `resolve`).
    Far,
    /// Every CPU of one NUMA node.
    Node(u32),
    /// An explicit CPU list.
    Cpus(Vec<u32>),
}

impl Placement {
    /// Parses `on`, `near`, `far`, `node:N`, or a CPU list such as `0-3,8` (optionally
    /// written `cpus:0-3,8`).
    pub(crate) fn parse(text: &str) -> Result<Placement, String> {
        let t = text.trim();
        match t {
            "on" => return Ok(Placement::On),
            "near" => return Ok(Placement::Near),
            "far" => return Ok(Placement::Far),
            _ => {}
        }
        if let Some(n) = t.strip_prefix("node:") {
            return n
                .trim()
                .parse()
                .map(Placement::Node)
                .map_err(|_| format!("`{text}`: node:N needs a node number, e.g. node:1"));
        }
        let list = t.strip_prefix("cpus:").unwrap_or(t);
        match cpulist(list) {
            Ok(cpus) if !cpus.is_empty() => Ok(Placement::Cpus(cpus)),
            _ => Err(format!(
                "`{text}` is not a placement: use on, near, far, node:N or a CPU list like 0-3,8"
            )),
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::On => f.write_str("on"),
            Placement::Near => f.write_str("near"),
            Placement::Far => f.write_str("far"),
            Placement::Node(n) => write!(f, "node:{n}"),
            Placement::Cpus(c) => f.write_str(&format_cpu_list(c)),
        }
    }
}

/// The CPUs to pin to, with a sentence saying how they were chosen (stored with the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) cpus: Vec<u32>,
    pub(crate) why: String,
}

/// Resolves `placement` on a machine whose online CPUs are `cpus`, with `distance(a, b)` the
/// NUMA distance between nodes `a` and `b` (None when unknown), relative to the `anchor`
/// CPUs (the effective affinity of the device's interrupt). `Err` is a reason the level is
/// not applicable here; it is recorded, not fatal.
///
/// On, near and far are disjoint on every topology, and only online CPUs (those in `cpus`)
/// are ever chosen. Where relations disagree — a package or last-level cache that spans NUMA
/// nodes (Intel sub-NUMA clustering, QEMU nodes with interleaved CPU numbers) — the node
/// wins: a CPU on another node is never near, even where sysfs says it shares the interrupt
/// CPU's LLC, and it can be far. That is how the kernel judges it: `rq_affinity=1` completes
/// on the interrupt CPU only when the submitting CPU shares its cache by the scheduler's
/// measure (`cpus_share_cache`), and x86 stops the scheduler's LLC at a node boundary. The
/// lab's snc2 shows it: I/O submitted from a CPU that shares the L3 from the other node is
/// completed on that CPU, like I/O from any far CPU (tests/lab.rs). Far never takes a CPU
/// near takes, so the sets stay disjoint whatever the tiers below find.
pub(crate) fn resolve(
    placement: &Placement,
    anchor: &[u32],
    cpus: &[CpuPlace],
    distance: &dyn Fn(u32, u32) -> Option<u32>,
) -> Result<Resolved, String> {
    let online: BTreeSet<u32> = cpus.iter().map(|c| c.cpu).collect();
    let needs_anchor = matches!(placement, Placement::On | Placement::Near | Placement::Far);
    let anchors: Vec<&CpuPlace> = cpus.iter().filter(|c| anchor.contains(&c.cpu)).collect();
    if needs_anchor && anchors.is_empty() {
        return Err(if anchor.is_empty() {
            "the device takes no interrupt here, so there is no CPU to be on, near or far \
             from (set anchor_cpu in the experiment file)"
                .to_string()
        } else {
            format!(
                "the interrupt CPUs {} are not online",
                format_cpu_list(anchor)
            )
        });
    }
    match placement {
        Placement::On => Ok(Resolved {
            cpus: anchors.iter().map(|c| c.cpu).collect(),
            why: if anchor.len() == 1 {
                format!("{} takes the device's interrupt", cpus_text(anchor))
            } else {
                format!("{} take the device's interrupts", cpus_text(anchor))
            },
        }),
        Placement::Near => resolve_near(anchor, &anchors, cpus),
        Placement::Far => {
            // Far chooses only among the CPUs near does not take (see above).
            let near = resolve_near(anchor, &anchors, cpus)
                .map(|r| r.cpus)
                .unwrap_or_default();
            let rest: Vec<CpuPlace> = cpus
                .iter()
                .filter(|c| !near.contains(&c.cpu))
                .cloned()
                .collect();
            resolve_far(anchor, &anchors, (&rest, cpus), distance)
        }
        Placement::Node(n) => {
            let found: Vec<u32> = cpus
                .iter()
                .filter(|c| c.node == *n)
                .map(|c| c.cpu)
                .collect();
            if found.is_empty() {
                Err(format!("node {n} has no online CPU here"))
            } else {
                Ok(Resolved {
                    why: format!("the online CPUs of node {n}"),
                    cpus: found,
                })
            }
        }
        Placement::Cpus(list) => {
            let missing: Vec<u32> = list
                .iter()
                .copied()
                .filter(|c| !online.contains(c))
                .collect();
            if missing.is_empty() {
                Ok(Resolved {
                    cpus: list.clone(),
                    why: format!("{}, as the experiment names them", cpus_text(list)),
                })
            } else {
                let are = if missing.len() == 1 { "is" } else { "are" };
                Err(format!("{} {are} not online here", cpus_text(&missing)))
            }
        }
    }
}

/// `CPU 3` or `CPUs 0-1`.
pub(crate) fn cpus_text(cpus: &[u32]) -> String {
    let s = if cpus.len() == 1 { "" } else { "s" };
    format!("CPU{s} {}", format_cpu_list(cpus))
}

fn same_core(a: &CpuPlace, c: &CpuPlace) -> bool {
    a.package == c.package && a.core == c.core
}

/// Online CPUs other than the anchors that satisfy `pred`.
fn others(cpus: &[CpuPlace], anchor: &[u32], pred: &dyn Fn(&CpuPlace) -> bool) -> Vec<u32> {
    cpus.iter()
        .filter(|c| !anchor.contains(&c.cpu) && pred(c))
        .map(|c| c.cpu)
        .collect()
}

/// Other CPUs close to the anchors: the first non-empty tier of shared last-level cache and
/// package (both within the anchor's node), node, then SMT siblings. The node counts only on
/// a machine of several: on one node it is the whole machine, and "near" would take every
/// other package (a 4-package box with Hyper-Threading, case 2's), which shares no cache
/// with the interrupt CPU and is what `far` means there; the sibling is then the CPU near.
fn resolve_near(
    anchor: &[u32],
    anchors: &[&CpuPlace],
    cpus: &[CpuPlace],
) -> Result<Resolved, String> {
    let pick = |pred: &dyn Fn(&CpuPlace) -> bool| others(cpus, anchor, pred);
    let nodes = cpus.iter().map(|c| c.node).collect::<BTreeSet<u32>>().len();
    // (what one CPU does, what several do, which CPUs do it)
    type Tier = (&'static str, &'static str, fn(&CpuPlace, &CpuPlace) -> bool);
    // Cache and package count within the node only (see `resolve`).
    let tiers: [Tier; 4] = [
        (
            "shares the last-level cache of",
            "share the last-level cache of",
            |a, c| a.llc.is_some() && a.llc == c.llc && a.node == c.node && !same_core(a, c),
        ),
        ("shares the package of", "share the package of", |a, c| {
            a.package == c.package && a.node == c.node && !same_core(a, c)
        }),
        (
            "shares the NUMA node of",
            "share the NUMA node of",
            |a, c| a.node == c.node && !same_core(a, c),
        ),
        (
            "is the SMT sibling of",
            "are the SMT siblings of",
            same_core,
        ),
    ];
    for (one, several, f) in tiers.iter() {
        if nodes == 1 && one.contains("NUMA node") {
            continue;
        }
        let found = pick(&|c: &CpuPlace| anchors.iter().any(|a| f(a, c)));
        if !found.is_empty() {
            let verb = if found.len() == 1 { one } else { several };
            return Ok(Resolved {
                why: format!(
                    "{} {verb} interrupt {}",
                    cpus_text(&found),
                    cpus_text(anchor)
                ),
                cpus: found,
            });
        }
    }
    Err(if !pick(&|_| true).is_empty() {
        format!(
            "no other online CPU shares a cache, a package or a core with interrupt {}",
            cpus_text(anchor)
        )
    } else {
        format!(
            "no other online CPU besides interrupt {}",
            cpus_text(anchor)
        )
    })
}

/// Far among `rest` (the CPUs near does not take), of the machine's `all`.
fn resolve_far(
    anchor: &[u32],
    anchors: &[&CpuPlace],
    (cpus, all): (&[CpuPlace], &[CpuPlace]),
    distance: &dyn Fn(u32, u32) -> Option<u32>,
) -> Result<Resolved, String> {
    let pick = |pred: &dyn Fn(&CpuPlace) -> bool| others(cpus, anchor, pred);
    let anchor_nodes: BTreeSet<u32> = anchors.iter().map(|a| a.node).collect();
    let dist = |a: u32, b: u32| -> u32 {
        distance(a, b)
            // Unknown distances: any other node is farther than our own.
            .unwrap_or(if a == b { 10 } else { 20 })
    };
    // Nodes with online CPUs other than the anchor's, ranked by their distance to the nearest
    // anchor node (so with anchors on two nodes, "far" is far from both).
    // (distance, CPUs, how many nodes they are on)
    let mut best: Option<(u32, Vec<u32>, usize)> = None;
    let nodes: BTreeSet<u32> = cpus.iter().map(|c| c.node).collect();
    for node in nodes.iter().filter(|n| !anchor_nodes.contains(n)) {
        let d = anchor_nodes
            .iter()
            .map(|a| dist(*a, *node))
            .min()
            .unwrap_or(0);
        let here = pick(&|c: &CpuPlace| c.node == *node);
        if here.is_empty() {
            continue;
        }
        match &mut best {
            Some((bd, list, n)) if *bd == d => {
                list.extend(here);
                *n += 1;
            }
            Some((bd, _, _)) if *bd > d => {}
            _ => best = Some((d, here, 1)),
        }
    }
    if let Some((d, mut found, nodes)) = best {
        found.sort_unstable();
        let on = if nodes == 1 {
            "the most distant node".to_string()
        } else {
            format!("the {nodes} most distant nodes")
        };
        return Ok(Resolved {
            why: format!(
                "{} on {on} (distance {d}) from interrupt {}",
                cpus_text(&found),
                cpus_text(anchor)
            ),
            cpus: found,
        });
    }
    let other_package = pick(&|c: &CpuPlace| anchors.iter().all(|a| a.package != c.package));
    if !other_package.is_empty() {
        return Ok(Resolved {
            why: format!(
                "one NUMA node: {} {} in another package than interrupt {}",
                cpus_text(&other_package),
                if other_package.len() == 1 {
                    "is"
                } else {
                    "are"
                },
                cpus_text(anchor)
            ),
            cpus: other_package,
        });
    }
    let other_llc = pick(&|c: &CpuPlace| {
        anchors
            .iter()
            .all(|a| a.llc.is_some() && c.llc.is_some() && a.llc != c.llc)
    });
    if !other_llc.is_empty() {
        return Ok(Resolved {
            why: format!(
                "one package: {} {} another last-level cache than interrupt {}",
                cpus_text(&other_llc),
                if other_llc.len() == 1 { "uses" } else { "use" },
                cpus_text(anchor)
            ),
            cpus: other_llc,
        });
    }
    // Nothing farther: either the machine is one node, package and cache, or the interrupt
    // CPUs are in every one of them (a queue per node, each completing on its own node).
    // Said of the whole machine, not of what near left.
    type Key = fn(&CpuPlace) -> Option<u32>;
    let keys: [(&str, Key); 3] = [
        ("NUMA node", |c| Some(c.node)),
        ("package", |c| Some(c.package)),
        ("last-level cache", |c| c.llc),
    ];
    let set = |of: &mut dyn Iterator<Item = &CpuPlace>, key: Key| {
        of.filter_map(key).collect::<BTreeSet<u32>>()
    };
    let spread = keys
        .into_iter()
        .find(|(_, key)| set(&mut all.iter(), *key).len() > 1);
    Err(match spread {
        Some((what, key))
            if set(&mut anchors.iter().copied(), key) == set(&mut all.iter(), key) =>
        {
            format!(
                "nothing here is farther than `near`: interrupt {} are in every {what}",
                cpus_text(anchor)
            )
        }
        Some((what, _)) => format!(
            "nothing here is farther than `near`: every CPU in another {what} than interrupt \
             {} is near it",
            cpus_text(anchor)
        ),
        None => "nothing here is farther than `near`: one NUMA node, one package, one \
                 last-level cache"
            .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Alan Brunelle's box (case 0): 4 cells of 4 CPUs, one package per cell, no SMT.
    fn table(d: &[Vec<u32>]) -> impl Fn(u32, u32) -> Option<u32> + '_ {
        move |a, b| d.get(a as usize)?.get(b as usize).copied()
    }

    fn unknown(_: u32, _: u32) -> Option<u32> {
        None
    }

    fn four_cells() -> (Vec<CpuPlace>, Vec<Vec<u32>>) {
        let cpus = (0..16)
            .map(|cpu| CpuPlace {
                cpu,
                core: cpu % 4,
                package: cpu / 4,
                node: cpu / 4,
                llc: Some(cpu / 4),
            })
            .collect();
        // Cell 3 is the farthest from cell 0.
        let d = vec![
            vec![10, 20, 20, 30],
            vec![20, 10, 20, 20],
            vec![20, 20, 10, 20],
            vec![30, 20, 20, 10],
        ];
        (cpus, d)
    }

    fn this_vm() -> Vec<CpuPlace> {
        (0..2)
            .map(|cpu| CpuPlace {
                cpu,
                core: cpu,
                package: 0,
                node: 0,
                llc: Some(0),
            })
            .collect()
    }

    #[test]
    fn on_near_far_on_a_four_cell_box() {
        let (cpus, d) = four_cells();
        let on = resolve(&Placement::On, &[2], &cpus, &table(&d)).unwrap();
        assert_eq!(on.cpus, vec![2]);
        let near = resolve(&Placement::Near, &[2], &cpus, &table(&d)).unwrap();
        assert_eq!(near.cpus, vec![0, 1, 3]);
        let far = resolve(&Placement::Far, &[2], &cpus, &table(&d)).unwrap();
        assert_eq!(far.cpus, vec![12, 13, 14, 15], "{}", far.why);
        // `show` and the report print these: one CPU reads as one, several as several.
        assert_eq!(on.why, "CPU 2 takes the device's interrupt");
        assert_eq!(
            near.why,
            "CPUs 0-1,3 share the last-level cache of interrupt CPU 2"
        );
        assert_eq!(
            far.why,
            "CPUs 12-15 on the most distant node (distance 30) from interrupt CPU 2"
        );
        let near_one = resolve(&Placement::Near, &[0, 1, 2], &cpus, &table(&d)).unwrap();
        assert_eq!(
            near_one.why,
            "CPU 3 shares the last-level cache of interrupt CPUs 0-2"
        );
        let on_many = resolve(&Placement::On, &[0, 1, 2], &cpus, &table(&d)).unwrap();
        assert_eq!(on_many.why, "CPUs 0-2 take the device's interrupts");
    }

    #[test]
    fn far_without_distances_takes_every_other_node() {
        let (cpus, _) = four_cells();
        let far = resolve(&Placement::Far, &[0], &cpus, &unknown).unwrap();
        assert_eq!(far.cpus, (4..16).collect::<Vec<_>>());
        // Three nodes, not one (it read "on the most distant node").
        assert!(
            far.why
                .starts_with("CPUs 4-15 on the 3 most distant nodes (distance 20)"),
            "{}",
            far.why
        );
    }

    #[test]
    fn near_prefers_other_cores_to_smt_siblings() {
        // 1 package, 2 cores x 2 threads: CPUs 0/2 on core 0, 1/3 on core 1.
        let cpus: Vec<CpuPlace> = (0..4)
            .map(|cpu| CpuPlace {
                cpu,
                core: cpu % 2,
                package: 0,
                node: 0,
                llc: Some(0),
            })
            .collect();
        let near = resolve(&Placement::Near, &[0], &cpus, &unknown).unwrap();
        assert_eq!(near.cpus, vec![1, 3]);
        // A one-core machine: only the sibling is left.
        let near = resolve(
            &Placement::Near,
            &[0],
            &cpus[..1]
                .iter()
                .chain(&cpus[2..3])
                .cloned()
                .collect::<Vec<_>>(),
            &unknown,
        )
        .unwrap();
        assert_eq!(near.cpus, vec![2]);
        assert!(near.why.contains("SMT sibling"), "{}", near.why);
    }

    /// Case 2's box: 4 packages of one core with Hyper-Threading, one node, an L3 each.
    fn four_packages_with_ht() -> Vec<CpuPlace> {
        (0..8)
            .map(|cpu| CpuPlace {
                cpu,
                core: 0,
                package: cpu / 2,
                node: 0,
                llc: Some(cpu / 2),
            })
            .collect()
    }

    /// On case 2's box the sibling is the CPU near (it shares every cache); the other
    /// packages are far.
    #[test]
    fn on_one_node_of_several_packages_near_is_the_sibling_and_far_another_package() {
        let cpus = four_packages_with_ht();
        let near = resolve(&Placement::Near, &[0], &cpus, &unknown).unwrap();
        assert_eq!(near.cpus, vec![1], "{}", near.why);
        assert_eq!(near.why, "CPU 1 is the SMT sibling of interrupt CPU 0");
        let far = resolve(&Placement::Far, &[0], &cpus, &unknown).unwrap();
        assert_eq!(far.cpus, (2..8).collect::<Vec<_>>(), "{}", far.why);
        assert_eq!(
            far.why,
            "one NUMA node: CPUs 2-7 are in another package than interrupt CPU 0"
        );
        // Interrupts on CPUs 2-4 (three packages): far is the fourth package.
        let far = resolve(&Placement::Far, &[2, 3, 4], &cpus, &unknown).unwrap();
        assert_eq!(far.cpus, vec![0, 1, 6, 7], "{}", far.why);
        // Without SMT nothing shares a cache with the interrupt CPU: near says so.
        let solo: Vec<CpuPlace> = cpus.iter().filter(|c| c.cpu % 2 == 0).cloned().collect();
        let err = resolve(&Placement::Near, &[0], &solo, &unknown).unwrap_err();
        assert_eq!(
            err,
            "no other online CPU shares a cache, a package or a core with interrupt CPU 0"
        );
        let far = resolve(&Placement::Far, &[0], &solo, &unknown).unwrap();
        assert_eq!(far.cpus, vec![2, 4, 6], "{}", far.why);
    }

    #[test]
    fn a_small_vm_has_nothing_far_and_says_why() {
        let cpus = this_vm();
        assert_eq!(
            resolve(&Placement::Near, &[1], &cpus, &unknown)
                .unwrap()
                .cpus,
            vec![0]
        );
        let err = resolve(&Placement::Far, &[1], &cpus, &unknown).unwrap_err();
        assert!(err.contains("one NUMA node"), "{err}");
    }

    /// A queue per node, each interrupt on its own node: nothing is far, and the reason is
    /// where the interrupts are, not that the machine has one node.
    #[test]
    fn interrupts_on_every_node_leave_nothing_far_and_say_so() {
        let (cpus, d) = four_cells();
        let anchors = [0, 4, 8, 12];
        let err = resolve(&Placement::Far, &anchors, &cpus, &table(&d)).unwrap_err();
        assert_eq!(
            err,
            "nothing here is farther than `near`: interrupt CPUs 0,4,8,12 are in every NUMA node"
        );
    }

    #[test]
    fn no_interrupt_means_no_anchor() {
        let err = resolve(&Placement::On, &[], &this_vm(), &unknown).unwrap_err();
        assert!(err.contains("anchor_cpu"), "{err}");
        // Explicit lists and nodes need no anchor.
        let r = resolve(&Placement::Node(0), &[], &this_vm(), &unknown).unwrap();
        assert_eq!(r.cpus, vec![0, 1]);
        assert!(resolve(&Placement::Cpus(vec![5]), &[], &this_vm(), &unknown).is_err());
        // `show` quotes the reason as where the workload ran: it names the CPUs.
        let r = resolve(&Placement::Cpus(vec![0, 1]), &[], &this_vm(), &unknown).unwrap();
        assert_eq!(r.why, "CPUs 0-1, as the experiment names them");
    }

    /// Two packages of 4 cores whose nodes interleave (QEMU's `-numa node,cpus=0-1,cpus=4-5`,
    /// Intel SNC, AMD NPS): node 0 = CPUs 0-1,4-5, node 1 = 2-3,6-7; each package's L3 spans
    /// both nodes. `llc` None models a kernel that exposes no cache ids.
    fn interleaved(llc: bool) -> Vec<CpuPlace> {
        (0..8)
            .map(|cpu| CpuPlace {
                cpu,
                core: cpu % 4,
                package: cpu / 4,
                node: u32::from(cpu % 4 >= 2),
                llc: llc.then_some(cpu / 4),
            })
            .collect()
    }

    fn two_nodes(a: u32, b: u32) -> Option<u32> {
        Some(if a == b { 10 } else { 20 })
    }

    #[test]
    fn the_node_wins_where_a_cache_spans_nodes() {
        let cpus = interleaved(true);
        // CPUs 2 and 3 share CPU 0's L3 from node 1: the kernel completes their I/O on
        // themselves under rq_affinity=1, as for any far CPU. Near is CPU 1 alone.
        let near = resolve(&Placement::Near, &[0], &cpus, &two_nodes).unwrap();
        assert_eq!(near.cpus, vec![1], "{}", near.why);
        let far = resolve(&Placement::Far, &[0], &cpus, &two_nodes).unwrap();
        assert_eq!(far.cpus, vec![2, 3, 6, 7], "{}", far.why);
        // Without cache ids the package is judged in the same way.
        let cpus = interleaved(false);
        let near = resolve(&Placement::Near, &[0], &cpus, &two_nodes).unwrap();
        assert_eq!(near.cpus, vec![1], "{}", near.why);
        let far = resolve(&Placement::Far, &[0], &cpus, &two_nodes).unwrap();
        assert_eq!(far.cpus, vec![2, 3, 6, 7], "{}", far.why);
    }

    #[test]
    fn on_near_far_are_disjoint_and_online_on_every_topology() {
        let (cells, d) = four_cells();
        let smt: Vec<CpuPlace> = (0..4)
            .map(|cpu| CpuPlace {
                cpu,
                core: cpu / 2,
                package: 0,
                node: 0,
                llc: Some(0),
            })
            .collect();
        let cells_distance = table(&d);
        type Machine<'a> = (&'a str, Vec<CpuPlace>, &'a dyn Fn(u32, u32) -> Option<u32>);
        let machines: Vec<Machine> = vec![
            ("four cells", cells, &cells_distance),
            ("interleaved", interleaved(true), &two_nodes),
            ("interleaved, no cache ids", interleaved(false), &two_nodes),
            ("one core pair", smt, &unknown),
            ("four packages with HT", four_packages_with_ht(), &unknown),
            ("this vm", this_vm(), &unknown),
        ];
        for (name, all, distance) in machines {
            // Every CPU in turn is offline, and every other CPU in turn takes the interrupt;
            // the offline CPU is also named as an interrupt CPU, as a stale mask would.
            for offline in all.iter().map(|c| c.cpu) {
                let online: Vec<CpuPlace> =
                    all.iter().filter(|c| c.cpu != offline).cloned().collect();
                for anchor in online.iter().map(|c| c.cpu) {
                    let get = |p: Placement| {
                        resolve(&p, &[anchor, offline], &online, distance)
                            .map(|r| r.cpus)
                            .unwrap_or_default()
                    };
                    let (on, near, far) = (
                        get(Placement::On),
                        get(Placement::Near),
                        get(Placement::Far),
                    );
                    let ctx = format!("{name}: irq on {anchor}, {offline} offline: on {on:?} near {near:?} far {far:?}");
                    assert_eq!(on, vec![anchor], "{ctx}");
                    for (a, b) in [(&on, &near), (&on, &far), (&near, &far)] {
                        assert!(a.iter().all(|c| !b.contains(c)), "{ctx}");
                    }
                    for set in [&on, &near, &far] {
                        assert!(!set.contains(&offline), "{ctx}");
                    }
                }
            }
        }
    }

    #[test]
    fn parses_and_prints_levels() {
        assert_eq!(Placement::parse("near").unwrap(), Placement::Near);
        assert_eq!(Placement::parse("node:1").unwrap(), Placement::Node(1));
        assert_eq!(
            Placement::parse("0-2,8").unwrap(),
            Placement::Cpus(vec![0, 1, 2, 8])
        );
        assert_eq!(Placement::parse("cpus:3").unwrap().to_string(), "3");
        assert!(Placement::parse("nearby")
            .unwrap_err()
            .contains("on, near, far"));
        assert!(Placement::parse("3-1").is_err());
    }
}

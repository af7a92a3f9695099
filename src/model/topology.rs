//! CPUs and NUMA nodes: which CPUs are online, how they group into SMT threads, cores,
//! clusters, dies and packages, which last-level cache each shares, which node each belongs
//! to and how far nodes are from each other. Experiments place fio "on", "near" or "far"
//! from an interrupt with exactly these relations, so every field comes from the kernel's
//! own files under /sys/devices/system/{cpu,node}.

use super::Warnings;
use crate::sys::parse::{cpulist, cpulist_or_null, ParseError};
use crate::sys::{SysError, SysRoot};
use serde::{Deserialize, Serialize};

const CPU_DIR: &str = "/sys/devices/system/cpu";
const NODE_DIR: &str = "/sys/devices/system/node";

/// One online CPU and where it sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Cpu {
    pub cpu: u32,
    /// `core_id`: unique only within a package.
    pub core: u32,
    /// `physical_package_id` (the socket).
    pub package: u32,
    /// `die_id` where the kernel exposes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub die: Option<u32>,
    /// `cluster_id` where the kernel exposes a real one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<u32>,
    /// The NUMA node (0 on kernels or machines without NUMA).
    pub node: u32,
    /// SMT siblings including this CPU (`thread_siblings_list`).
    pub siblings: Vec<u32>,
    /// CPUs in the same package.
    pub package_cpus: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llc: Option<Cache>,
}

/// A cache level shared by a set of CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Cache {
    pub level: u32,
    /// The cache's id where exposed (distinguishes L3s on multi-CCX parts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    pub cpus: Vec<u32>,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Node {
    pub node: u32,
    pub cpus: Vec<u32>,
    /// SLIT distance to every node, by node id (10 = local).
    pub distances: Vec<NodeDistance>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NodeDistance {
    pub node: u32,
    pub distance: u32,
}

/// Everything read from /sys/devices/system.
#[derive(Debug, Clone, Default)]
pub(crate) struct Topology {
    pub online: Vec<u32>,
    pub possible: Vec<u32>,
    pub isolated: Vec<u32>,
    pub nohz_full: Vec<u32>,
    pub cpus: Vec<Cpu>,
    pub nodes: Vec<Node>,
}

/// Reads a CPU-list file, turning a parse error into one that names it.
pub(crate) fn read_cpulist(root: &SysRoot, abs: &str) -> Result<Vec<u32>, SysError> {
    read_with(root, abs, cpulist)
}

type ListParser = fn(&str) -> Result<Vec<u32>, ParseError>;

fn read_with(root: &SysRoot, abs: &str, parse: ListParser) -> Result<Vec<u32>, SysError> {
    let text = root.read(abs)?;
    parse(&text).map_err(|e: ParseError| root.parse_error(abs, e.line, e.message))
}

/// Like `read_cpulist`, but an absent file is `None` and a bad one a warning.
fn optional_cpulist(root: &SysRoot, abs: &str, warn: &mut Warnings) -> Option<Vec<u32>> {
    optional_with(root, abs, warn, cpulist)
}

fn optional_with(
    root: &SysRoot,
    abs: &str,
    warn: &mut Warnings,
    parse: ListParser,
) -> Option<Vec<u32>> {
    match read_with(root, abs, parse) {
        Ok(v) => Some(v),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            warn.push(e.to_string());
            None
        }
    }
}

fn optional_number(root: &SysRoot, abs: &str) -> Option<i64> {
    root.attr(abs).and_then(|s| s.parse::<i64>().ok())
}

pub(crate) fn read(root: &SysRoot, warn: &mut Warnings) -> Result<Topology, SysError> {
    let online = read_cpulist(root, &format!("{CPU_DIR}/online"))?;
    if online.is_empty() {
        return Err(root.parse_error(&format!("{CPU_DIR}/online"), 1, "no online CPU"));
    }
    let possible = optional_cpulist(root, &format!("{CPU_DIR}/possible"), warn)
        .unwrap_or_else(|| online.clone());
    let isolated = optional_cpulist(root, &format!("{CPU_DIR}/isolated"), warn).unwrap_or_default();
    // Debian's 6.1 prints `(null)` here when nohz_full= is not set: no CPU.
    let nohz_full = optional_with(root, &format!("{CPU_DIR}/nohz_full"), warn, cpulist_or_null)
        .unwrap_or_default();
    let nodes = read_nodes(root, warn)?;

    let mut cpus = Vec::with_capacity(online.len());
    for &cpu in &online {
        let topo = format!("{CPU_DIR}/cpu{cpu}/topology");
        let number = |name: &str| optional_number(root, &format!("{topo}/{name}"));
        let core = number("core_id");
        let package = number("physical_package_id");
        if core.is_none() || package.is_none() {
            warn.push(format!(
                "{}: no core_id/physical_package_id; CPU {cpu} treated as its own core",
                root.path(&topo).display()
            ));
        }
        let siblings = optional_cpulist(root, &format!("{topo}/thread_siblings_list"), warn)
            .unwrap_or_else(|| vec![cpu]);
        let package_cpus = optional_cpulist(root, &format!("{topo}/package_cpus_list"), warn)
            .or_else(|| optional_cpulist(root, &format!("{topo}/core_siblings_list"), warn))
            .unwrap_or_else(|| vec![cpu]);
        // x86 prints 65535 (and others -1) for "no cluster/die information".
        let real = |v: Option<i64>| v.filter(|v| (0..65535).contains(v)).map(|v| v as u32);
        let node = nodes
            .iter()
            .find(|n| n.cpus.contains(&cpu))
            .map(|n| n.node)
            .unwrap_or(0);
        cpus.push(Cpu {
            cpu,
            core: core.filter(|c| *c >= 0).unwrap_or(cpu as i64) as u32,
            package: package.filter(|p| *p >= 0).unwrap_or(0) as u32,
            die: real(number("die_id")),
            cluster: real(number("cluster_id")),
            node,
            siblings,
            package_cpus,
            llc: read_llc(root, cpu, warn),
        });
    }
    Ok(Topology {
        online,
        possible,
        isolated,
        nohz_full,
        cpus,
        nodes,
    })
}

/// The highest-level unified or data cache this CPU reports.
fn read_llc(root: &SysRoot, cpu: u32, warn: &mut Warnings) -> Option<Cache> {
    let dir = format!("{CPU_DIR}/cpu{cpu}/cache");
    let mut best: Option<Cache> = None;
    for entry in root.list_optional(&dir).ok()? {
        if !entry.starts_with("index") {
            continue;
        }
        let idx = format!("{dir}/{entry}");
        if root.attr(&format!("{idx}/type")).as_deref() == Some("Instruction") {
            continue;
        }
        let Some(level) = optional_number(root, &format!("{idx}/level")) else {
            continue;
        };
        let Some(cpus) = optional_cpulist(root, &format!("{idx}/shared_cpu_list"), warn) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| (level as u32) > b.level) {
            best = Some(Cache {
                level: level as u32,
                id: optional_number(root, &format!("{idx}/id")).map(|v| v as u32),
                cpus,
            });
        }
    }
    best
}

fn read_nodes(root: &SysRoot, warn: &mut Warnings) -> Result<Vec<Node>, SysError> {
    let mut ids: Vec<u32> = root
        .list_optional(NODE_DIR)?
        .iter()
        .filter_map(|e| e.strip_prefix("node")?.parse().ok())
        .collect();
    ids.sort_unstable();
    let mut nodes = Vec::new();
    for &id in &ids {
        let dir = format!("{NODE_DIR}/node{id}");
        let cpus = optional_cpulist(root, &format!("{dir}/cpulist"), warn).unwrap_or_default();
        // The distance file lists one number per online node, in node-id order.
        let distances = match root.read_optional(&format!("{dir}/distance"))? {
            Some(text) => {
                let values: Vec<u32> = text
                    .split_whitespace()
                    .filter_map(|v| v.parse().ok())
                    .collect();
                if values.len() == ids.len() {
                    ids.iter()
                        .zip(values)
                        .map(|(&node, distance)| NodeDistance { node, distance })
                        .collect()
                } else {
                    warn.push(format!(
                        "{}: {} distances for {} nodes; ignored",
                        root.path(&format!("{dir}/distance")).display(),
                        values.len(),
                        ids.len()
                    ));
                    Vec::new()
                }
            }
            None => Vec::new(),
        };
        nodes.push(Node {
            node: id,
            cpus,
            distances,
        });
    }
    Ok(nodes)
}

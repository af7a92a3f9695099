//! The model as a readable tree for people: node → package → core → threads, then devices
//! with their knobs, hardware queues and interrupts, then the busiest interrupts. ASCII only,
//! aligned, wrapped to 80 columns where a line would run long.

use super::{Allowed, BlockDevice, Machine};
use crate::sys::parse::format_cpulist as cl;
use std::collections::BTreeSet;
use std::fmt::Write;

const WIDTH: usize = 80;

impl crate::output::Render for Machine {
    fn text(&self) -> String {
        tree(self)
    }
}

/// Names from the machine, files or the database are escaped for the terminal
/// (`report::format::terminal_safe`).
pub(crate) fn tree(m: &Machine) -> String {
    crate::report::format::terminal_safe_lines(&tree_unescaped(m)).into_owned()
}

fn tree_unescaped(m: &Machine) -> String {
    let mut s = String::new();
    let host = m.hostname.as_deref().unwrap_or("(unknown host)");
    let kernel = m.kernel.as_deref().unwrap_or("(unknown kernel)");
    let _ = writeln!(s, "{host}  Linux {kernel}");
    let _ = writeln!(
        s,
        "{} CPUs online ({}), possible {}, {} NUMA node{}",
        m.online.len(),
        cl(&m.online),
        cl(&m.possible),
        m.nodes.len(),
        if m.nodes.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "isolated {}  nohz_full {}",
        cl(&m.isolated),
        cl(&m.nohz_full)
    );
    if let Some(r) = &m.rates {
        let _ = writeln!(
            s,
            "rates over {:.2} s (two readings)",
            r.interval_ns as f64 / 1e9
        );
    }
    cpus(&mut s, m);
    devices(&mut s, m);
    nics(&mut s, m);
    interrupts(&mut s, m);
    s
}

fn cpus(s: &mut String, m: &Machine) {
    let _ = writeln!(s, "\nCPUs");
    for node in &m.nodes {
        let dist: Vec<String> = node
            .distances
            .iter()
            .map(|d| format!("{}:{}", d.node, d.distance))
            .collect();
        let _ = writeln!(
            s,
            "  node {}  cpus {}  distances {}",
            node.node,
            cl(&node.cpus),
            if dist.is_empty() {
                "-".to_string()
            } else {
                dist.join(" ")
            }
        );
        let in_node: Vec<_> = m.cpus.iter().filter(|c| c.node == node.node).collect();
        let packages: BTreeSet<u32> = in_node.iter().map(|c| c.package).collect();
        for pkg in packages {
            let pcpus: Vec<u32> = in_node
                .iter()
                .filter(|c| c.package == pkg)
                .map(|c| c.cpu)
                .collect();
            // A package that spans nodes (Intel SNC, interleaved QEMU nodes) shows this
            // node's share of it, and the whole.
            let whole: Vec<u32> = m
                .cpus
                .iter()
                .filter(|c| c.package == pkg)
                .map(|c| c.cpu)
                .collect();
            let of = if whole.len() > pcpus.len() {
                format!(" (of the package's {})", cl(&whole))
            } else {
                String::new()
            };
            let _ = writeln!(s, "    package {pkg}  cpus {}{of}", cl(&pcpus));
            let cores: BTreeSet<(Option<u32>, u32)> = in_node
                .iter()
                .filter(|c| c.package == pkg)
                .map(|c| (c.die, c.core))
                .collect();
            let mut llcs_shown = BTreeSet::new();
            for (die, core) in cores {
                let threads: Vec<_> = in_node
                    .iter()
                    .filter(|c| c.package == pkg && c.core == core && c.die == die)
                    .collect();
                let ids: Vec<u32> = threads.iter().map(|c| c.cpu).collect();
                let mut line = format!("      core {core:<3} threads {:<8}", cl(&ids));
                if let Some(llc) = threads.first().and_then(|c| c.llc.as_ref()) {
                    if llcs_shown.insert(llc.cpus.clone()) {
                        let _ = write!(line, " L{} shared by {}", llc.level, cl(&llc.cpus));
                    }
                }
                let _ = writeln!(s, "{}", line.trim_end());
                if let Some(r) = &m.rates {
                    for c in &threads {
                        let ints = r.cpu_interrupts_per_s.get(&c.cpu).copied();
                        let share = r.cpus.get(&c.cpu);
                        let mut l = format!("        cpu {:<4}", c.cpu);
                        if let Some(i) = ints {
                            let _ = write!(l, " {i:>9.1} ints/s");
                        }
                        if let Some(sh) = share {
                            let _ = write!(
                                l,
                                "  usr {:.0}% sys {:.0}% irq+soft {:.0}% iowait {:.0}% idle {:.0}%",
                                sh.usr_pct + sh.nice_pct,
                                sh.sys_pct,
                                sh.irq_pct + sh.softirq_pct,
                                sh.iowait_pct,
                                sh.idle_pct
                            );
                        }
                        let _ = writeln!(s, "{l}");
                    }
                }
            }
        }
    }
}

fn size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// Writes `items` after `lead`, wrapping at WIDTH with continuation lines indented.
fn wrapped(s: &mut String, lead: &str, items: &[String]) {
    let indent = " ".repeat(lead.len() + 1);
    let mut line = lead.to_string();
    let mut first = false;
    for item in items {
        if !first && line.len() + 1 + item.len() > WIDTH {
            let _ = writeln!(s, "{line}");
            line = indent.clone();
            first = true;
        }
        if !first {
            line.push(' ');
        }
        line.push_str(item);
        first = false;
    }
    let _ = writeln!(s, "{line}");
}

/// One line per interface, then one per interrupt with the CPU that serves it.
fn nics(s: &mut String, m: &Machine) {
    if m.nics.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nNetwork interfaces");
    for n in &m.nics {
        if n.is_virtual {
            let _ = writeln!(s, "  {}  virtual (no device)", n.name);
            continue;
        }
        // As for disks: a numa_node of -1 on a one-node machine still means that node.
        let node = match (n.node, m.nodes.as_slice()) {
            (Some(v), _) => v.to_string(),
            (None, [only]) => format!("{} (the only one)", only.node),
            (None, _) => "-".to_string(),
        };
        let _ = writeln!(
            s,
            "  {}  driver {}  device {}  pci {}  node {}  {} IRQs",
            n.name,
            n.driver.as_deref().unwrap_or("-"),
            n.device.as_deref().unwrap_or("-"),
            n.pci.as_deref().unwrap_or("-"),
            node,
            n.irqs.len()
        );
        for i in &n.irqs {
            let cpus = i.effective.as_deref().map_or("-".to_string(), cl);
            let _ = writeln!(s, "    irq {:>4} {}  on CPU {}", i.irq, i.name, cpus);
        }
    }
}

fn devices(s: &mut String, m: &Machine) {
    let _ = writeln!(s, "\nDevices");
    let (unused, used): (Vec<&BlockDevice>, Vec<&BlockDevice>) = m
        .devices
        .iter()
        .partition(|d| d.size_bytes == 0 && !d.holds_data);
    for d in used {
        device(s, m, d);
    }
    if !unused.is_empty() {
        let names: Vec<String> = unused.iter().map(|d| d.name.clone()).collect();
        wrapped(s, "  size 0 (unused):", &names);
    }
    // Schedulers no disk lists yet, which the kernel loads when one is first selected.
    let listed = |name: &String| {
        m.devices.iter().any(
            |d| matches!(d.allowed.get("scheduler"), Some(Allowed::Choices(c)) if c.contains(name)),
        )
    };
    let loadable: Vec<String> = m
        .schedulers_on_demand
        .iter()
        .filter(|n| !listed(n))
        .cloned()
        .collect();
    if !loadable.is_empty()
        && m.devices
            .iter()
            .any(|d| d.allowed.contains_key("scheduler"))
    {
        wrapped(s, "  schedulers loaded on demand (any disk):", &loadable);
    }
}

fn device(s: &mut String, m: &Machine, d: &BlockDevice) {
    let mut head = format!("  {}  {}  {}", d.name, d.kind, size(d.size_bytes));
    match d.rotational {
        Some(true) => head.push_str("  rotational"),
        Some(false) => head.push_str("  non-rotational"),
        None => {}
    }
    if let Some(drv) = &d.driver {
        let _ = write!(head, "  driver {drv}");
    }
    if d.hidden {
        head.push_str("  (hidden multipath path)");
    }
    let _ = writeln!(s, "{head}");
    if !d.paths.is_empty() {
        let _ = writeln!(s, "    multipath paths {}", d.paths.join(" "));
    }
    if !d.slaves.is_empty() {
        let _ = writeln!(s, "    built from {}", d.slaves.join(" "));
    }
    let mut ctrl = String::from("    controller");
    match &d.pci {
        Some(pci) => {
            let _ = write!(ctrl, " pci {pci}");
            if let Some(drv) = &d.controller_driver {
                let _ = write!(ctrl, " ({drv})");
            }
        }
        None => ctrl.push_str(" none (virtual or platform device)"),
    }
    // A virtual device belongs to no node; a controller's numa_node is -1 when the firmware
    // names none, which on a one-node machine still means that node.
    match (d.node, &d.pci, m.nodes.as_slice()) {
        (Some(n), _, _) => {
            let _ = write!(ctrl, "  node {n}");
        }
        (None, None, _) => {}
        (None, Some(_), [only]) => {
            let _ = write!(ctrl, "  node {} (the only one)", only.node);
        }
        (None, Some(_), _) => ctrl.push_str("  node not given by the firmware"),
    }
    if let Some(model) = &d.model {
        let _ = write!(ctrl, "  model {model}");
    }
    if let Some(file) = &d.backing_file {
        let _ = write!(ctrl, "  backing file {file}");
    }
    let _ = writeln!(s, "{ctrl}");
    if d.holds_data {
        wrapped(
            s,
            "    HOLDS DATA:",
            &d.data_reasons
                .iter()
                .map(|r| format!("{r};"))
                .collect::<Vec<_>>(),
        );
    } else {
        let _ = writeln!(
            s,
            "    in use by nothing (not mounted, no holders, no swap, no partitions); its \
             contents are read only before a write"
        );
    }
    let knobs: Vec<String> = super::devices::KNOBS
        .iter()
        .filter_map(|k| Some((k.to_string(), d.knobs.get(*k)?)))
        .map(|(k, v)| {
            let v = if v.contains(' ') {
                format!("\"{v}\"")
            } else {
                v.clone()
            };
            match d.allowed.get(&k) {
                Some(Allowed::Choices(c)) if c.len() > 1 => format!("{k}={v} ({})", c.join("|")),
                _ => format!("{k}={v}"),
            }
        })
        .collect();
    if !knobs.is_empty() {
        wrapped(s, "    knobs:", &knobs);
    }
    if !d.iosched.is_empty() {
        let settings: Vec<String> = d.iosched.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let scheduler = d.knobs.get("scheduler").map_or("", String::as_str);
        wrapped(s, &format!("    {scheduler} (queue/iosched/):"), &settings);
    }
    // With io_poll=1 the device has poll queues (the kernel sets it only then), and those
    // are the queues that take no interrupt while the others do.
    let polls = d.knobs.get("io_poll").is_some_and(|v| v.trim() == "1")
        && d.queues.iter().any(|q| q.irq.is_some());
    for q in &d.queues {
        let irq = match q.irq {
            Some(n) => format!("irq {n}"),
            None if polls => "no interrupt: a poll queue".to_string(),
            None => "irq -".to_string(),
        };
        let _ = writeln!(s, "    queue {:<3} cpus {:<12} {irq}", q.queue, cl(&q.cpus));
    }
    for irq in m.device_irqs(&d.name) {
        let mut l = format!("    irq {:<5} {}", irq.irq, irq.name);
        if irq.managed {
            l.push_str("  managed");
        }
        if let Some(a) = &irq.affinity {
            let _ = write!(l, "  affinity {}", cl(a));
        }
        if let Some(e) = &irq.effective {
            let _ = write!(l, "  effective {}", cl(e));
        }
        let _ = writeln!(s, "{l}");
    }
    if let Some(p) = &d.placement {
        let _ = writeln!(
            s,
            "    placement: on {}  near {}  far {}{}",
            cl(&p.on),
            cl(&p.near),
            cl(&p.far),
            unplaced_note(m, p)
        );
    }
    if let Some(r) = m.rates.as_ref().and_then(|r| r.disks.get(&d.name)) {
        let _ = writeln!(
            s,
            "    io: r/s {:.1}  w/s {:.1}  rMB/s {:.2}  wMB/s {:.2}  util {:.1}%",
            r.r_per_s, r.w_per_s, r.rmb_per_s, r.wmb_per_s, r.util_pct
        );
    }
}

/// The online CPUs in none of on, near and far, said so (the SMT siblings of interrupt CPUs,
/// which near leaves out while other cores share the cache: cells4's NVMe left four CPUs
/// unexplained); empty when every CPU is placed.
fn unplaced_note(m: &Machine, p: &super::placement::OnNearFar) -> String {
    let placed = |c: &u32| p.on.contains(c) || p.near.contains(c) || p.far.contains(c);
    let rest: Vec<u32> = m.online.iter().copied().filter(|c| !placed(c)).collect();
    if rest.is_empty() {
        return String::new();
    }
    let core = |c: u32| {
        m.cpus
            .iter()
            .find(|x| x.cpu == c)
            .map(|x| (x.package, x.core))
    };
    let sibling = |c: &u32| {
        p.on.iter()
            .any(|o| *o != *c && core(*o).is_some() && core(*o) == core(*c))
    };
    let what = match (rest.iter().all(sibling), rest.len()) {
        (true, 1) => "the SMT sibling of an interrupt CPU, neither near nor far",
        (true, _) => "SMT siblings of interrupt CPUs, neither near nor far",
        (false, _) => "neither near nor far",
    };
    format!(
        "\n      {}: {what}",
        crate::sys::parse::format_cpulist(&rest)
    )
}

/// Cuts a line to WIDTH columns, marking the cut.
fn clip(line: &str) -> String {
    if line.chars().count() <= WIDTH {
        return line.to_string();
    }
    let mut out: String = line.chars().take(WIDTH - 1).collect();
    out.push('~');
    out
}

fn interrupts(s: &mut String, m: &Machine) {
    const SHOWN: usize = 15;
    let with_rates = m.rates.is_some();
    let mut rows: Vec<_> = m.irqs.iter().collect();
    let key = |i: &super::Irq| -> f64 {
        if with_rates {
            i.rate.as_ref().map(|r| r.total).unwrap_or(-1.0)
        } else {
            i.total as f64
        }
    };
    rows.sort_by(|a, b| key(b).total_cmp(&key(a)));
    let _ = writeln!(
        s,
        "\nInterrupts (busiest {} of {}, by {})",
        SHOWN.min(rows.len()),
        rows.len(),
        if with_rates {
            "rate"
        } else {
            "count since boot"
        }
    );
    let _ = writeln!(s, "  (M: kernel-managed affinity, cannot be moved)");
    let _ = writeln!(
        s,
        "  {:<5} {:>11}  {:<16} {:<9} {:<5} M name",
        "irq",
        if with_rates { "per second" } else { "count" },
        "top CPUs (share)",
        "affinity",
        "eff"
    );
    for irq in rows.into_iter().take(SHOWN) {
        let (value, per_cpu): (String, Vec<(u32, f64)>) = match (&irq.rate, with_rates) {
            (Some(r), true) => (
                format!("{:.1}", r.total),
                r.per_cpu.iter().map(|(c, v)| (*c, *v)).collect(),
            ),
            (None, true) => ("-".to_string(), Vec::new()),
            _ => (
                irq.total.to_string(),
                irq.counts.iter().map(|(c, v)| (*c, *v as f64)).collect(),
            ),
        };
        let sum: f64 = per_cpu.iter().map(|(_, v)| v).sum();
        let mut top = per_cpu.clone();
        top.sort_by(|a, b| b.1.total_cmp(&a.1));
        let tops: Vec<String> = top
            .iter()
            .filter(|(_, v)| *v > 0.0)
            .take(2)
            .map(|(c, v)| format!("{c}({:.0}%)", v * 100.0 / sum))
            .collect();
        let line = format!(
            "  {:<5} {:>11}  {:<16} {:<9} {:<5} {} {}",
            irq.irq.to_string(),
            value,
            if tops.is_empty() {
                "-".to_string()
            } else {
                tops.join(" ")
            },
            irq.affinity
                .as_deref()
                .map(cl)
                .unwrap_or_else(|| "-".into()),
            irq.effective
                .as_deref()
                .map(cl)
                .unwrap_or_else(|| "-".into()),
            if irq.managed { "M" } else { " " },
            irq.name
        );
        let _ = writeln!(s, "{}", clip(&line));
    }
}

#[cfg(test)]
mod tests {
    use crate::model::Machine;
    use crate::sys::SysRoot;

    #[test]
    fn schedulers_that_no_disk_lists_are_named_as_loaded_on_demand() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines/two-node-nvme");
        let mut m = Machine::read(&SysRoot::at(dir).unwrap()).unwrap();
        // sda lists bfq and every disk lists kyber: only the third is news.
        m.schedulers_on_demand = vec!["bfq".into(), "kyber".into(), "adios".into()];
        let t = super::tree(&m);
        assert!(
            t.contains("\n  schedulers loaded on demand (any disk): adios\n"),
            "{t}"
        );
        m.schedulers_on_demand.pop();
        assert!(!super::tree(&m).contains("on demand"));
    }

    /// A package that spans nodes (Intel SNC, the lab's snc2) is listed under each node with
    /// that node's share of its CPUs, and the whole package named: the share alone read as
    /// a package of its own.
    #[test]
    fn a_package_spanning_nodes_shows_its_share_and_the_whole() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines/two-node-nvme");
        let mut m = Machine::read(&SysRoot::at(dir).unwrap()).unwrap();
        let t = super::tree(&m);
        assert!(!t.contains("of the package's"), "{t}");
        for c in &mut m.cpus {
            c.package = 0;
        }
        let node0 = crate::sys::parse::format_cpulist(&m.nodes[0].cpus);
        let all: Vec<u32> = m.cpus.iter().map(|c| c.cpu).collect();
        let t = super::tree(&m);
        let want = format!(
            "    package 0  cpus {node0} (of the package's {})",
            crate::sys::parse::format_cpulist(&all)
        );
        assert!(t.contains(&want), "{want}\n{t}");
    }

    /// A controller whose firmware names no node (numa_node -1, this VM's virtio disk) is on
    /// the one node of a one-node machine, and of no known node on a larger one; a virtual
    /// device is on none, so nothing is said.
    #[test]
    fn a_controller_without_a_node_is_named_for_what_that_means() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines/two-node-nvme");
        let mut m = Machine::read(&SysRoot::at(dir).unwrap()).unwrap();
        let nvme = m.devices.iter().position(|d| d.name == "nvme0n1").unwrap();
        m.devices[nvme].node = None;
        let line = |m: &Machine| {
            let t = super::tree(m);
            let from = t.find("\n  nvme0n1").unwrap_or_else(|| panic!("{t}"));
            let ctrl = t[from..].find("    controller").unwrap() + from;
            t[ctrl..t[ctrl..].find('\n').unwrap() + ctrl].to_string()
        };
        assert!(
            line(&m).ends_with("  node not given by the firmware"),
            "{}",
            line(&m)
        );
        m.nodes.truncate(1);
        let only = m.nodes[0].node;
        assert!(
            line(&m).ends_with(&format!("  node {only} (the only one)")),
            "{}",
            line(&m)
        );
        let t = super::tree(&m);
        assert!(!t.contains("node unknown"), "{t}");
        // A network interface's controller too (this VM's eth0 read "node -" beside its
        // disk's node 0).
        m.nics = vec![crate::model::nics::Nic {
            name: "eth0".into(),
            is_virtual: false,
            driver: Some("virtio_net".into()),
            device: Some("virtio2".into()),
            pci: Some("0000:00:03.0".into()),
            node: None,
            irqs: Vec::new(),
        }];
        let mut text = String::new();
        super::nics(&mut text, &m);
        assert!(
            text.contains(&format!("  node {only} (the only one)  ")),
            "{text}"
        );
    }
}

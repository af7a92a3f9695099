//! Network interfaces in the machine model: interrupt experiments (issue #16) place their
//! workload against a NIC the way fio experiments place against a disk, so the model says
//! which interfaces exist, which driver and PCI function serve them, their NUMA node, and
//! which interrupts they raise with the CPU that serves each (effective affinity).

use super::device_map::walk_up;
use super::{Irq, Warnings};
use crate::sys::SysRoot;
use serde::{Deserialize, Serialize};

pub(crate) const NET: &str = "/sys/class/net";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Nic {
    pub name: String,
    /// True when the interface has no `device` link (veth, bridge, tun...): no interrupts.
    pub is_virtual: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The device directly under the interface (`virtio1`, or the PCI function itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    pub irqs: Vec<NicIrq>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NicIrq {
    pub irq: u32,
    pub name: String,
    /// CPUs the interrupt is delivered to (`effective_affinity_list`).
    pub effective: Option<Vec<u32>>,
}

/// Every interface under /sys/class/net except `lo`. A missing directory is a warning.
pub(crate) fn read(root: &SysRoot, irqs: &[Irq], warn: &mut Warnings) -> Vec<Nic> {
    let names = match root.list_optional(NET) {
        Ok(n) => n,
        Err(e) => {
            warn.push(format!("network interfaces not shown: {e}"));
            return Vec::new();
        }
    };
    names
        .into_iter()
        .filter(|n| n != "lo")
        .map(|n| read_nic(root, &n, irqs))
        .collect()
}

fn read_nic(root: &SysRoot, name: &str, irqs: &[Irq]) -> Nic {
    let dev_link = format!("{NET}/{name}/device");
    let mut nic = Nic {
        name: name.to_string(),
        is_virtual: !root.exists(&dev_link),
        driver: None,
        device: None,
        pci: None,
        node: None,
        irqs: Vec::new(),
    };
    if nic.is_virtual {
        return nic;
    }
    let Ok(real) = root.resolve(&format!("{NET}/{name}")) else {
        return nic;
    };
    let c = walk_up(root, &real);
    nic.driver = c.driver.or(c.pci_driver);
    // names[0] is the `net` class directory; the device follows it.
    nic.device = c.names.get(1).cloned().or_else(|| c.pci.clone());
    nic.pci = c.pci;
    nic.node = c.node;
    let prefixes: Vec<&str> = std::iter::once(name).chain(nic.device.as_deref()).collect();
    let named = |irq: &Irq| {
        irq.actions
            .iter()
            .any(|a| prefixes.iter().any(|p| a.starts_with(p)))
    };
    nic.irqs = irqs
        .iter()
        .filter(|irq| irq.number().is_some_and(|n| c.irqs.contains(&n)) || named(irq))
        .filter_map(|irq| {
            Some(NicIrq {
                irq: irq.number()?,
                name: irq.name.clone(),
                effective: irq.effective.clone(),
            })
        })
        .collect();
    nic
}

/// The machine model with NIC `name` standing as an experiment's target device: an entry
/// with the NIC's name, node and interrupts and no block queue, so placement (on / near / far
/// from the CPUs its interrupts are delivered to) and `irq_cpu` are resolved by the same code
/// as for a disk. Queue knobs, fio and traces never reach it (the experiment file refuses
/// them with `nic`). `Err` names the NICs the machine has.
pub(crate) fn with_nic_target(mut m: super::Machine, name: &str) -> Result<super::Machine, String> {
    let Some(nic) = m.nics.iter().find(|n| n.name == name) else {
        let have: Vec<&str> = m.nics.iter().map(|n| n.name.as_str()).collect();
        return Err(format!(
            "[target] nic = \"{name}\": no such network interface here (this machine has: {})",
            if have.is_empty() {
                "none".to_string()
            } else {
                have.join(", ")
            }
        ));
    };
    if m.device(name).is_some() {
        return Err(format!(
            "[target] nic = \"{name}\": a block device has the same name"
        ));
    }
    let mut dev = super::BlockDevice {
        name: name.to_string(),
        dev: String::new(),
        sysfs: format!("{NET}/{name}"),
        kind: "nic".to_string(),
        size_bytes: 0,
        rotational: None,
        read_only: true,
        driver: nic.driver.clone(),
        pci: nic.pci.clone(),
        controller_driver: None,
        node: nic.node,
        model: None,
        backing_file: None,
        partitions: Vec::new(),
        hidden: false,
        paths: Vec::new(),
        slaves: Vec::new(),
        knobs: Default::default(),
        allowed: Default::default(),
        iosched: Default::default(),
        queues: Vec::new(),
        irqs: traffic_irqs(&m, nic),
        placement: None,
        holds_data: false,
        data_reasons: Vec::new(),
    };
    dev.placement = super::placement::placement(&m, &dev);
    m.devices.push(dev);
    Ok(m)
}

/// The NIC's interrupts that carry its traffic, which on / near / far and `irq_cpu` are about:
/// not its control vectors (virtio's `-config`, which fires only on a configuration change;
/// mlx5's `async`; the `misc` vector of i40e and ice; ixgbe's and igb's link vector, named
/// after the interface alone), whose CPU says nothing of where packets are handled. All of
/// them when none is told apart (one vector for everything).
fn traffic_irqs(m: &super::Machine, nic: &Nic) -> Vec<u32> {
    let control = |action: &str| {
        action.ends_with("-config")
            || action.contains("async")
            || action.ends_with("misc")
            || action == nic.name
    };
    let traffic: Vec<u32> = nic
        .irqs
        .iter()
        .filter(|i| {
            m.irqs
                .iter()
                .find(|irq| irq.number() == Some(i.irq))
                .is_none_or(|irq| !irq.actions.iter().all(|a| control(a)))
        })
        .map(|i| i.irq)
        .collect();
    if traffic.is_empty() {
        nic.irqs.iter().map(|i| i.irq).collect()
    } else {
        traffic
    }
}

#[cfg(test)]
mod tests {
    use crate::model::Machine;
    use crate::sys::SysRoot;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// A tree with one virtio NIC (two MSI vectors), a veth and lo.
    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = |s: &str| dir.path().join(s);
        for d in [
            "sys/block",
            "sys/devices/system/cpu",
            "sys/class/net",
            "proc/irq/24",
            "proc/irq/25",
        ] {
            fs::create_dir_all(p(d)).unwrap();
        }
        fs::write(p("sys/devices/system/cpu/online"), "0-1\n").unwrap();
        fs::write(
            p("proc/interrupts"),
            "           CPU0       CPU1\n 24:  5  0  PCI-MSI 1  virtio1-input.0\n 25:  0  7  PCI-MSI 2  virtio1-output.0\n 26:  0  0  PCI-MSI 3  nvme0q1\n 27:  0  0  PCI-MSI 4  virtio1-config\n",
        )
        .unwrap();
        fs::write(p("proc/irq/24/effective_affinity_list"), "0\n").unwrap();
        fs::write(p("proc/irq/25/effective_affinity_list"), "1\n").unwrap();
        // The configuration vector, which never fires, on a CPU the traffic never reaches.
        fs::create_dir_all(p("proc/irq/27")).unwrap();
        fs::write(p("proc/irq/27/effective_affinity_list"), "1\n").unwrap();
        let pci = "sys/devices/pci0000:00/0000:00:03.0";
        fs::create_dir_all(p(&format!("{pci}/msi_irqs"))).unwrap();
        fs::write(p(&format!("{pci}/msi_irqs/24")), "msix\n").unwrap();
        fs::write(p(&format!("{pci}/msi_irqs/25")), "msix\n").unwrap();
        fs::write(p(&format!("{pci}/msi_irqs/27")), "msix\n").unwrap();
        fs::write(p(&format!("{pci}/numa_node")), "0\n").unwrap();
        fs::create_dir_all(p("sys/bus/virtio/drivers/virtio_net")).unwrap();
        fs::create_dir_all(p(&format!("{pci}/virtio1/net/eth0"))).unwrap();
        symlink(
            p("sys/bus/virtio/drivers/virtio_net"),
            p(&format!("{pci}/virtio1/driver")),
        )
        .unwrap();
        symlink(
            p(&format!("{pci}/virtio1")),
            p(&format!("{pci}/virtio1/net/eth0/device")),
        )
        .unwrap();
        symlink(
            p(&format!("{pci}/virtio1/net/eth0")),
            p("sys/class/net/eth0"),
        )
        .unwrap();
        fs::create_dir_all(p("sys/devices/virtual/net/veth0")).unwrap();
        fs::create_dir_all(p("sys/devices/virtual/net/lo")).unwrap();
        symlink(p("sys/devices/virtual/net/veth0"), p("sys/class/net/veth0")).unwrap();
        symlink(p("sys/devices/virtual/net/lo"), p("sys/class/net/lo")).unwrap();
        dir
    }

    #[test]
    fn virtio_nic_with_its_queue_interrupts_and_a_virtual_one() {
        let dir = tree();
        let m = Machine::read(&SysRoot::at(dir.path()).unwrap()).unwrap();
        let names: Vec<&str> = m.nics.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["eth0", "veth0"]);
        let eth = &m.nics[0];
        assert!(!eth.is_virtual);
        assert_eq!(eth.driver.as_deref(), Some("virtio_net"));
        assert_eq!(eth.device.as_deref(), Some("virtio1"));
        assert_eq!(eth.pci.as_deref(), Some("0000:00:03.0"));
        assert_eq!(eth.node, Some(0));
        let irqs: Vec<(u32, Option<Vec<u32>>)> = eth
            .irqs
            .iter()
            .map(|i| (i.irq, i.effective.clone()))
            .collect();
        assert_eq!(
            irqs,
            [
                (24, Some(vec![0])),
                (25, Some(vec![1])),
                (27, Some(vec![1]))
            ]
        );
        assert!(m.nics[1].is_virtual && m.nics[1].irqs.is_empty());
        let text = crate::model::render::tree(&m);
        assert!(text.contains("eth0  driver virtio_net"), "{text}");
        assert!(text.contains("veth0  virtual"), "{text}");
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains("\"nics\":[{\"name\":\"eth0\""), "{json}");
    }

    /// A NIC as the target: its interrupts stand for a device's, so "on" is where they are
    /// delivered (CPU 0 takes input.0, CPU 1 output.0); a NIC not here is refused with the
    /// list, as is a virtual one's absent placement (no interrupts, nothing to be on).
    #[test]
    fn a_nic_stands_as_the_target_device_with_its_interrupts() {
        let dir = tree();
        let m = Machine::read(&SysRoot::at(dir.path()).unwrap()).unwrap();
        let with = super::with_nic_target(m.clone(), "eth0").unwrap();
        let d = with.device("eth0").unwrap();
        assert_eq!((d.kind.as_str(), d.irqs.clone()), ("nic", vec![24, 25]));
        assert!(d.queues.is_empty() && d.knobs.is_empty() && !d.holds_data);
        assert_eq!(d.placement.as_ref().unwrap().on, vec![0, 1]);
        // With its traffic on CPU 0 alone, "on" is CPU 0: the configuration vector's CPU 1
        // is not where the NIC's interrupts are.
        fs::write(
            dir.path().join("proc/irq/25/effective_affinity_list"),
            "0\n",
        )
        .unwrap();
        let m = Machine::read(&SysRoot::at(dir.path()).unwrap()).unwrap();
        let with = super::with_nic_target(m.clone(), "eth0").unwrap();
        assert_eq!(
            with.device("eth0").unwrap().placement.as_ref().unwrap().on,
            vec![0]
        );
        let veth = super::with_nic_target(m.clone(), "veth0").unwrap();
        assert!(veth.device("veth0").unwrap().placement.is_none());
        let err = super::with_nic_target(m, "eth9").unwrap_err();
        assert!(err.contains("eth9") && err.contains("eth0, veth0"), "{err}");
    }
}

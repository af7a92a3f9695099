//! `[target]`: the device(s) the workload drives (the scratch loop device, or named devices),
//! how many scratch devices and how large, the anchor CPU, remote fio hosts, or, for a
//! network engine, the NIC whose interrupts placement and `irq_cpu` refer to.

use std::ops::Range;

use toml::de::{DeTable, DeValue};

use super::{integer, parse_size, Diagnostic, HostSpec, Value, Walker};
use crate::target::DEFAULT_SCRATCH_BYTES;

/// The device the workload runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetDevice {
    /// A scratch loop device over a RAM-backed file, created and removed by iolab.
    Scratch,
    /// Named block devices (`nvme0n1`, without /dev/), driven at the same time; never
    /// empty, no duplicates.
    Named(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    pub device: TargetDevice,
    /// How many scratch devices to create (`count`); 1 unless the target is the scratch one.
    pub(crate) count: u32,
    /// Size of the scratch device in bytes.
    pub(crate) size_bytes: u64,
    /// The keys that size the scratch devices (`count`, `size`) as the file gives them,
    /// each with its line: a `--device` that replaces the scratch target says they go unused.
    pub(crate) scratch_keys: Vec<(&'static str, usize)>,
    /// The CPU that stands in for the device's interrupt CPU when placing fio `on`, `near`
    /// or `far` — for devices that take no interrupt (the loop device of the default
    /// target). When set it is used even if the device has interrupts.
    pub(crate) anchor_cpu: Option<u32>,
    /// fio servers (`fio --server` on each; "host" or "host,port") that run the job at once
    /// through fio's client mode, on the named device of each. Empty: this machine.
    pub hosts: Vec<String>,
    /// The same hosts, one each in the same order, with how to control them when
    /// `[[target.host]]` says (`host_table`).
    pub(crate) host_specs: Vec<HostSpec>,
    /// A network interface instead of a block device (`nic = "eth0"`, program engines only):
    /// placement and `irq_cpu` refer to its interrupts, the sampler counts them, and no
    /// block device is created or driven. With its line in the file.
    pub(crate) nic: Option<(String, usize)>,
    /// With `hosts`: devices of this machine to sample while fio runs on them
    /// (`local_devices`), such as a hypervisor's volumes that back its guests' disks. Kernel
    /// names or links under /dev, as `device` takes them; resolved and checked at run time.
    pub(crate) local_devices: Vec<String>,
}

/// The highest CPU number an experiment may name.
pub(crate) use crate::sys::parse::cpulist::MAX_CPU;

impl TargetSpec {
    /// Every host is controlled over SSH (and there is at least one).
    pub(crate) fn controlled(&self) -> bool {
        !self.host_specs.is_empty() && self.host_specs.iter().all(|h| h.ssh.is_some())
    }

    /// How many devices the workload drives at once.
    pub(crate) fn device_count(&self) -> usize {
        match &self.device {
            TargetDevice::Scratch => self.count as usize,
            TargetDevice::Named(names) => names.len(),
        }
    }
}

pub(super) const TARGET_KEYS: &[&str] = &[
    "device",
    "count",
    "size",
    "anchor_cpu",
    "hosts",
    "host",
    "nic",
    "local_devices",
];

/// Most scratch devices one experiment may create (each is RAM-backed).
pub(crate) const MAX_SCRATCH_COUNT: i64 = 64;

pub(super) fn device_is_scratch(d: &TargetDevice) -> bool {
    matches!(d, TargetDevice::Scratch)
}

/// What [target]'s keys said, each with where it was said, for the checks across keys.
struct TargetKeys {
    device: TargetDevice,
    device_span: Option<Range<usize>>,
    count: Option<(u32, Range<usize>)>,
    size: Option<(u64, Range<usize>)>,
    anchor_cpu: Option<u32>,
    hosts: Option<(Vec<String>, Range<usize>)>,
    host_tables: Vec<HostSpec>,
    nic: Option<(String, Range<usize>)>,
    local_devices: Option<(Vec<String>, Range<usize>)>,
}

impl Walker<'_> {
    pub(super) fn target(&mut self, v: &Value) -> Option<TargetSpec> {
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([target])", "target");
            return None;
        };
        let mut k = self.target_keys(table);
        self.scratch_keys_fit(&k);
        let host_table_count = k.host_tables.len();
        let host_specs = self.host_specs(&mut k);
        self.nic_alone(&k, host_table_count);
        if let (Some((_, span)), true) = (&k.local_devices, host_specs.is_empty()) {
            self.error(
                span.clone(),
                "`local_devices` names devices of this machine to sample while fio runs on \
                 other hosts, but no `hosts` are named: for a run here, name them in `device`"
                    .to_string(),
                None,
            );
        }
        let count = match (device_is_scratch(&k.device), &k.count) {
            (true, Some((n, _))) => *n,
            _ => 1,
        };
        let given = [
            ("count", k.count.as_ref().map(|(_, s)| s.start)),
            ("size", k.size.as_ref().map(|(_, s)| s.start)),
        ];
        let scratch_keys = given
            .into_iter()
            .filter_map(|(key, at)| Some((key, self.position(at?).0)))
            .collect();
        Some(TargetSpec {
            device: k.device,
            count,
            scratch_keys,
            size_bytes: k.size.map_or(DEFAULT_SCRATCH_BYTES, |(b, _)| b),
            anchor_cpu: k.anchor_cpu,
            hosts: host_specs.iter().map(|h| h.fio.clone()).collect(),
            host_specs,
            nic: k.nic.map(|(n, span)| (n, self.position(span.start).0)),
            local_devices: k.local_devices.map(|(l, _)| l).unwrap_or_default(),
        })
    }

    /// Each key of [target] read on its own.
    fn target_keys(&mut self, table: &DeTable) -> TargetKeys {
        let mut k = TargetKeys {
            device: TargetDevice::Scratch,
            device_span: None,
            count: None,
            size: None,
            anchor_cpu: None,
            hosts: None,
            host_tables: Vec::new(),
            nic: None,
            local_devices: None,
        };
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "local_devices" => {
                    k.local_devices = self.local_device_list(value).map(|l| (l, value.span()))
                }
                "hosts" => k.hosts = self.host_list(value).map(|h| (h, value.span())),
                "host" => k.host_tables = self.host_tables(value).unwrap_or_default(),
                "nic" => k.nic = self.nic_name(value).map(|n| (n, value.span())),
                "device" => {
                    k.device_span = Some(value.span());
                    k.device = match value.get_ref() {
                        DeValue::Array(items) => self.device_list(value, items),
                        _ => self.nonempty_string(value, "device").and_then(|d| {
                            match self.device_name(&d, value.span(), true)? {
                                None => Some(TargetDevice::Scratch),
                                Some(n) => Some(TargetDevice::Named(vec![n])),
                            }
                        }),
                    }
                    .unwrap_or(TargetDevice::Scratch);
                }
                "count" => {
                    k.count = self
                        .integer_in(value, "count", 1, MAX_SCRATCH_COUNT)
                        .map(|n| (n as u32, value.span()));
                }
                "size" => k.size = self.scratch_size(value).map(|b| (b, value.span())),
                "anchor_cpu" => {
                    // Whether the CPU is online here is checked at plan time, per machine.
                    k.anchor_cpu = self
                        .integer_in(value, "anchor_cpu", 0, i64::from(MAX_CPU))
                        .map(|n| n as u32);
                }
                other => self.unknown_key(key.span(), other, "[target]", TARGET_KEYS),
            }
        }
        k
    }

    /// `size = "2G"`: the default scratch device's size, at least 1 MiB.
    fn scratch_size(&mut self, value: &Value) -> Option<u64> {
        let text = match value.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            DeValue::Integer(i) => integer(i).map(|n| n.to_string()),
            _ => None,
        };
        let bytes = text
            .as_deref()
            .and_then(parse_size)
            .filter(|b| *b >= 1 << 20);
        if bytes.is_none() {
            let whole = text
                .as_deref()
                .filter(|t| t.contains('.'))
                .map(|t| match crate::workload::options::whole_size(t.trim()) {
                    Some(w) => format!(" (a whole number: {w} for {})", t.trim()),
                    None => " (a whole number)".to_string(),
                })
                .unwrap_or_default();
            self.error(
                value.span(),
                format!("`size` is not a size of at least 1M{whole}"),
                Some("a size such as \"512M\", \"2G\" or bytes".to_string()),
            );
        }
        bytes
    }

    /// `size` and `count` describe the default scratch devices: with named devices they are
    /// mistakes.
    fn scratch_keys_fit(&mut self, k: &TargetKeys) {
        let TargetDevice::Named(names) = &k.device else {
            return;
        };
        if let Some((_, span)) = &k.size {
            self.error(
                span.clone(),
                format!(
                    "`size` sizes the default scratch device; `{}` has its own size",
                    names.join("`, `")
                ),
                None,
            );
        }
        if let Some((_, span)) = &k.count {
            self.error(
                span.clone(),
                format!(
                    "`count` is the number of default scratch devices; name each device \
                     instead (`{}` named)",
                    names.join("`, `")
                ),
                Some("device = [\"sdb\", \"sdc\"]".to_string()),
            );
        }
    }

    /// Every host, string form (`hosts`) first, then the [[target.host]] tables: a fio server
    /// named in both forms is named twice. Hosts run fio on their own devices, so the default
    /// scratch device (which exists only here) cannot serve a host that names none.
    fn host_specs(&mut self, k: &mut TargetKeys) -> Vec<HostSpec> {
        let mut host_specs: Vec<HostSpec> = Vec::new();
        for h in k.hosts.iter().flat_map(|(h, _)| h) {
            host_specs.push(HostSpec {
                fio: h.clone(),
                ssh: None,
                device: None,
                serve: None,
                line: k
                    .hosts
                    .as_ref()
                    .map_or(0, |(_, s)| self.position(s.start).0),
                listed: true,
            });
        }
        for h in std::mem::take(&mut k.host_tables) {
            if let Some(o) = host_specs
                .iter()
                .find(|o| super::host_table::same_server(&o.fio, &h.fio))
            {
                self.diags.push(Diagnostic {
                    line: h.line,
                    column: 1,
                    message: format!("fio server `{}` is also in `hosts` (as `{}`)", h.fio, o.fio),
                    allowed: None,
                });
            } else {
                host_specs.push(h);
            }
        }
        let deviceless = host_specs.iter().find(|h| h.device.is_none());
        let scratch_span = match (&k.hosts, deviceless) {
            (Some((_, span)), Some(h)) if h.ssh.is_none() => Some(span.clone()),
            (_, Some(h)) => Some(self.line_start(h.line)),
            _ => None,
        };
        if let (true, Some(span)) = (device_is_scratch(&k.device), scratch_span) {
            self.error(
                span,
                "`hosts` run fio on other machines, where the default scratch device does \
                 not exist: name the device they use"
                    .to_string(),
                Some("device = \"nvme0n1\" (the same name on every host)".to_string()),
            );
        }
        host_specs
    }

    /// A NIC target has no block devices and no hosts.
    fn nic_alone(&mut self, k: &TargetKeys, host_table_count: usize) {
        let Some((name, span)) = &k.nic else {
            return;
        };
        let other = [
            k.device_span.as_ref().map(|s| (s, "device")),
            k.count.as_ref().map(|(_, s)| (s, "count")),
            k.size.as_ref().map(|(_, s)| (s, "size")),
            k.hosts.as_ref().map(|(_, s)| (s, "hosts")),
        ];
        for (s, key) in other.into_iter().flatten() {
            self.error(
                s.clone(),
                format!("`{key}` names block devices, but the target is NIC `{name}`"),
                Some("a [target] with either `nic` or block devices".to_string()),
            );
        }
        if host_table_count > 0 {
            self.error(
                span.clone(),
                format!("[[target.host]] runs fio on hosts, but the target is NIC `{name}`"),
                None,
            );
        }
    }

    /// `local_devices = ["dm-0"]`: devices of this machine, each once.
    fn local_device_list(&mut self, v: &Value) -> Option<Vec<String>> {
        let key = "local_devices";
        let DeValue::Array(items) = v.get_ref() else {
            self.expected(v, "a list of this machine's block devices", key);
            return None;
        };
        let mut names: Vec<String> = Vec::new();
        for item in items {
            let Some(d) = self.nonempty_string(item, key) else {
                continue;
            };
            match self.device_name(&d, item.span(), false) {
                None => {}
                Some(None) => self.error(
                    item.span(),
                    "the default scratch device exists only for a run on this machine".to_string(),
                    Some("local_devices = [\"dm-0\", \"/dev/sdb\"]".to_string()),
                ),
                Some(Some(n)) if names.contains(&n) => {
                    self.error(item.span(), format!("`{n}` is listed twice"), None)
                }
                Some(Some(n)) => names.push(n),
            }
        }
        if items.is_empty() {
            self.error(v.span(), format!("`{key}` lists no device"), None);
        }
        (!names.is_empty()).then_some(names)
    }

    /// `nic`: a network interface's name as the kernel allows it (1 to 15 bytes, no `/`,
    /// whitespace or `:`); whether this machine has it is checked when the run starts.
    fn nic_name(&mut self, v: &Value) -> Option<String> {
        let name = self.nonempty_string(v, "nic")?;
        let ok = name.len() <= 15
            && name != "."
            && name != ".."
            && name
                .chars()
                .all(|c| c.is_ascii_graphic() && c != '/' && c != ':');
        if !ok {
            self.error(
                v.span(),
                format!("`{name}` is not a network interface name"),
                Some("an interface `iolab inspect` lists under NICs, e.g. \"eth0\"".to_string()),
            );
            return None;
        }
        Some(name)
    }

    /// `hosts`: fio server addresses as fio's `--client` takes them ("host", "host,port",
    /// "ip:1.2.3.4,8765", "ip6:::1,8765"), each once.
    pub(super) fn host_list(&mut self, v: &Value) -> Option<Vec<String>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.expected(v, "a list of fio server addresses", "hosts");
            return None;
        };
        if items.is_empty() {
            self.error(
                v.span(),
                "`hosts` lists no host".to_string(),
                Some("hosts = [\"10.0.0.1\", \"10.0.0.2,8765\"]".to_string()),
            );
            return None;
        }
        let mut out: Vec<String> = Vec::new();
        for item in items {
            let Some(h) = self.nonempty_string(item, "hosts") else {
                continue;
            };
            let h = h.trim().to_string();
            if let Some(problem) = super::host_table::fio_address_problem(&h) {
                self.error(
                    item.span(),
                    problem,
                    Some("\"host\", \"host,port\", \"ip:1.2.3.4,8765\"".to_string()),
                );
            } else if let Some(o) = out.iter().find(|o| super::host_table::same_server(o, &h)) {
                let said = if *o == h {
                    format!("host `{h}` is listed twice")
                } else {
                    format!("host `{h}` is listed twice (as `{o}` before)")
                };
                self.error(item.span(), said, None);
            } else {
                out.push(h);
            }
        }
        // The valid ones still count, so the checks that depend on `hosts` report too.
        (!out.is_empty()).then_some(out)
    }

    /// A `device` string checked as a block device name: `Some(None)` for "default",
    /// `None` (reported) when it is not a name. `scratch`: where "default" may stand (the
    /// hint offers it only there).
    pub(super) fn device_name(
        &mut self,
        d: &str,
        span: Range<usize>,
        scratch: bool,
    ) -> Option<Option<String>> {
        let name = d.trim().trim_start_matches("/dev/");
        if name == "default" {
            return Some(None);
        }
        if name.split('/').any(|p| p.is_empty() || p == "..")
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c))
        {
            self.error(
                span,
                format!("`{d}` is not a block device name"),
                Some(format!(
                    "{}a device name such as \"nvme0n1\" or \"/dev/sdb\"",
                    if scratch {
                        "\"default\" (a scratch loop device on /dev/shm) or "
                    } else {
                        ""
                    }
                )),
            );
            return None;
        }
        Some(Some(name.to_string()))
    }

    /// `device = ["sdb", "sdc"]`: named devices only, each once.
    pub(super) fn device_list(&mut self, v: &Value, items: &[Value]) -> Option<TargetDevice> {
        if items.is_empty() {
            self.error(
                v.span(),
                "`device` lists no device".to_string(),
                Some("device = [\"sdb\", \"sdc\"], or \"default\"".to_string()),
            );
            return None;
        }
        let mut names: Vec<String> = Vec::new();
        let mut ok = true;
        for item in items {
            let Some(d) = self.nonempty_string(item, "device") else {
                ok = false;
                continue;
            };
            match self.device_name(&d, item.span(), false) {
                None => ok = false,
                Some(None) => {
                    ok = false;
                    self.error(
                        item.span(),
                        "\"default\" cannot be mixed with named devices".to_string(),
                        Some(
                            "device = \"default\" with `count = N` for several scratch \
                             devices, or only named devices"
                                .to_string(),
                        ),
                    );
                }
                Some(Some(n)) if names.contains(&n) => {
                    ok = false;
                    self.error(item.span(), format!("`{n}` is listed twice"), None);
                }
                Some(Some(n)) => names.push(n),
            }
        }
        ok.then_some(TargetDevice::Named(names))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::*;
    use super::*;

    #[test]
    fn local_devices_are_this_machines_devices_beside_hosts() {
        let hosts = "[[target.host]]\nssh = \"h\"\nfio = \"10.0.0.1\"\ndevice = \"vdb\"\n";
        let e = parse(
            "x.toml",
            &format!("name = \"n\"\n[target]\nlocal_devices = [\"dm-0\", \"/dev/sdb\"]\n{hosts}"),
        )
        .unwrap();
        assert_eq!(e.target.local_devices, ["dm-0", "sdb"]);
        let text = errors(&format!(
            "name = \"n\"\n[target]\nlocal_devices = [\"dm-0\", \"default\", \"dm-0\", \"../x\"]\n\
             {hosts}"
        ))
        .join("\n");
        for want in [
            "x.toml:3:26: the default scratch device exists only for a run on this machine",
            "x.toml:3:37: `dm-0` is listed twice",
            "x.toml:3:45: `../x` is not a block device name",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
        let text = errors("name = \"n\"\n[target]\nlocal_devices = [\"dm-0\"]\n").join("\n");
        assert!(
            text.contains("x.toml:3:17: `local_devices` names devices of this machine")
                && text.contains("for a run here, name them in `device`"),
            "{text}"
        );
        let text = errors("name = \"n\"\n[target]\nlocal_devices = \"dm-0\"\n").join("\n");
        assert!(text.contains("x.toml:3:17: `local_devices`"), "{text}");
        // Beside fio servers alone, `trace = true` traces them (and nothing without them).
        let servers = "name = \"n\"\ntrace = true\n[target]\ndevice = \"vdb\"\nhosts = [\"h\"]\n";
        let e = parse("x.toml", &format!("{servers}local_devices = [\"dm-0\"]\n")).unwrap();
        assert!(e.trace && e.target.local_devices == ["dm-0"]);
        let text = errors(servers).join("\n");
        assert!(
            text.contains("x.toml:2:9: `trace = true` records this machine's device")
                && text.contains("or this machine's own devices in `local_devices`"),
            "{text}"
        );
    }

    #[test]
    fn several_targets_named_or_counted() {
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = [\"sdb\", \"/dev/sdc\"]\n",
        )
        .unwrap();
        assert_eq!(
            e.target.device,
            TargetDevice::Named(vec!["sdb".to_string(), "sdc".to_string()])
        );
        assert_eq!(e.target.device_count(), 2);
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"default\"\ncount = 3\n",
        )
        .unwrap();
        assert_eq!(
            (e.target.device.clone(), e.target.count),
            (TargetDevice::Scratch, 3)
        );
        assert_eq!(e.target.device_count(), 3);
        let text =
            errors("name = \"n\"\n[target]\ndevice = [\"sdb\", \"default\", \"sdb\", \"../x\"]\n")
                .join("\n");
        assert!(
            text.contains("x.toml:3:18: \"default\" cannot be mixed with named devices"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:3:29: `sdb` is listed twice"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:3:36: `../x` is not a block device name"),
            "{text}"
        );
        let text = errors("name = \"n\"\n[target]\ndevice = []\ncount = 0\n").join("\n");
        assert!(
            text.contains("x.toml:3:10: `device` lists no device"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:9: `count` is out of range"),
            "{text}"
        );
        let text =
            errors("name = \"n\"\n[target]\ndevice = [\"sdb\", \"sdc\"]\ncount = 2\n").join("\n");
        assert!(
            text.contains("x.toml:4:9: `count` is the number of default scratch devices"),
            "{text}"
        );
        // Several devices here are recorded together; a host's agent records one.
        let e = parse(
            "x.toml",
            "name = \"n\"\ntrace = true\n[target]\ncount = 2\n",
        )
        .unwrap();
        assert!(e.trace && e.target.device_count() == 2);
        let text = errors(
            "name = \"n\"\ntrace = true\n[target]\ndevice = [\"sdb\", \"sdc\"]\n\
             hosts = [\"a\", \"b\"]\n",
        )
        .join("\n");
        assert!(
            text.contains(
                "x.toml:2:9: `trace = true` with `hosts` records one device on each host, but \
                 [target] names 2"
            ),
            "{text}"
        );
    }

    #[test]
    fn target_checks() {
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"/dev/nvme0n1\"\n",
        )
        .unwrap();
        assert_eq!(
            e.target.device,
            TargetDevice::Named(vec!["nvme0n1".to_string()])
        );
        let text =
            errors("name = \"n\"\n[target]\ndevice = \"nvme0n1\"\nsize = \"1G\"\n").join("\n");
        assert!(
            text.contains("x.toml:4:8: `size` sizes the default scratch device"),
            "{text}"
        );
        let text =
            errors("name = \"n\"\n[target]\ndevice = \"../etc\"\nsize = \"lots\"\n").join("\n");
        assert!(
            text.contains("x.toml:3:10: `../etc` is not a block device name"),
            "{text}"
        );
        assert!(text.contains("x.toml:4:8: `size` is not a size"), "{text}");
        let text = errors("name = \"x\"\n[target]\nsize = \"1.5G\"\n").join("\n");
        assert!(text.contains("(a whole number: 1536M for 1.5G)"), "{text}");
    }

    #[test]
    fn hosts_run_the_job_elsewhere_and_change_nothing_here() {
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"nvme0n1\"\n\
             hosts = [\"10.0.0.1\", \"ip:10.0.0.2,8765\"]\n[factors]\nbs = [\"4k\", \"8k\"]\n\
             hipri = [false, true]\n[workload]\nioengine = \"io_uring\"\n",
        )
        .unwrap();
        assert_eq!(e.target.hosts, vec!["10.0.0.1", "ip:10.0.0.2,8765"]);
        let text = errors(
            "name = \"n\"\ntrace = true\n[target]\nhosts = [\"a\", \"a\", \"b c\"]\n\
             [factors]\nrq_affinity = [1, 2]\nplacement = [\"on\", \"far\"]\n",
        )
        .join("\n");
        assert!(
            text.contains("x.toml:2:9: `trace = true` records this machine's device"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:4:15: host `a` is listed twice"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:6:1: factor `rq_affinity` changes this machine"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:7:1: factor `placement` changes this machine"),
            "{text}"
        );
        let text = errors(
            "name = \"n\"\n[target]\nhosts = [\"h;rm\", \"ok\", \"h2,99999\", \"0.0.0.0\"]\n",
        )
        .join("\n");
        assert!(
            text.contains("`h;rm` is not a fio server address"),
            "{text}"
        );
        // Checked as a [[target.host]]'s `fio` is: fio's client refused them at every run.
        assert!(
            text.contains("`h2,99999`: `99999` is not a port (1 to 65535)"),
            "{text}"
        );
        assert!(text.contains("`0.0.0.0` names no host"), "{text}");
        assert!(
            text.contains("the default scratch device does not exist"),
            "{text}"
        );
        let text = errors("name = \"n\"\n[target]\ndevice = \"sdb\"\nhosts = []\n").join("\n");
        assert!(text.contains("x.toml:4:9: `hosts` lists no host"), "{text}");
    }

    #[test]
    fn anchor_cpu() {
        let e = parse("x.toml", "name = \"n\"\n[target]\nanchor_cpu = 1\n").unwrap();
        assert_eq!(e.target.anchor_cpu, Some(1));
        let e = parse("x.toml", "name = \"n\"\n").unwrap();
        assert_eq!(e.target.anchor_cpu, None);
        let text = errors("name = \"n\"\n[target]\nanchor_cpu = -1\n").join("\n");
        assert!(
            text.contains("x.toml:3:14: `anchor_cpu` is out of range"),
            "{text}"
        );
        assert!(text.contains("an integer from 0 to 8191"), "{text}");
        let text = errors("name = \"n\"\n[target]\nanchor_cpu = \"0\"\n").join("\n");
        assert!(
            text.contains("x.toml:3:14: `anchor_cpu` must be an integer"),
            "{text}"
        );
    }

    #[test]
    fn a_nic_target_goes_with_program_engines_and_without_block_devices() {
        let ok = "name = \"n\"\nengine = \"iperf3\"\n[iperf3]\nserver = \"10.0.0.2\"\n\
                  [target]\nnic = \"eth1\"\n[factors]\nplacement = [\"on\", \"far\"]\n\
                  irq_cpu = [0, 1]\n";
        let e = parse("x.toml", ok).unwrap();
        assert_eq!(e.target.nic, Some(("eth1".to_string(), 6)));
        let fio = errors("name = \"n\"\n[target]\nnic = \"eth1\"\n").join("\n");
        assert!(fio.contains("x.toml:3") && fio.contains("fio"), "{fio}");
        let both = errors(&ok.replace("nic = ", "device = \"sdb\"\nnic = ")).join("\n");
        assert!(both.contains("`device` names block devices"), "{both}");
        let knob = errors(&format!("{ok}scheduler = [\"none\"]\n")).join("\n");
        assert!(
            knob.contains("x.toml:10") && knob.contains("queue attribute"),
            "{knob}"
        );
        let bad = errors(&ok.replace("\"eth1\"", "\"../x\"")).join("\n");
        assert!(bad.contains("not a network interface name"), "{bad}");
    }

    /// A typo in the engine's table is the one error: the engine's options as factors, and
    /// its `nic` target, are not judged as fio's in its place.
    #[test]
    fn an_engine_tables_typo_is_said_once_not_again_by_its_factors() {
        let text = "name = \"n\"\nengine = \"iperf3\"\n[iperf3]\nserver = \"10.0.0.2\"\n\
                    paralel = 2\n[target]\nnic = \"eth1\"\n[factors]\nparallel = [1, 2]\n\
                    bitrate = [\"1G\"]\n";
        assert_eq!(
            errors(text),
            [
                "x.toml:5:1: unknown key `paralel` in [iperf3] (did you mean `parallel`?)",
                "    allowed: server, port, netns, server_netns, server_cpus, time, parallel, \
                 reverse, udp, bitrate, length, window, omit, zerocopy"
            ]
        );
    }
}

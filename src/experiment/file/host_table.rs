//! `[[target.host]]`: hosts named for control. The older `hosts = ["10.0.0.1"]` only names fio
//! servers; a host table also names how iolab reaches the host over SSH (to check it, set its
//! knobs, place its jobs and sample it through `iolab agent`) and, because hosts can differ,
//! the device fio drives there. Kept apart from the rest of [target] so this syntax grows here.
//!
//! ```toml
//! [[target.host]]
//! ssh = "lab1"                 # anything ssh takes: a name from ~/.ssh/config, user@address
//! fio = "10.0.0.1,8765"        # the fio server, on an address of its own (never all interfaces)
//! device = "loop5"             # optional: this host's device (else [target] device)
//! serve = true                 # optional: the agent starts a confined fio server on `fio`
//!                              # for the run (or on this address: "10.0.2.15,8765")
//! ```

use std::ops::Range;

use toml::de::DeValue;

use super::{Value, Walker};
use crate::hosts::ssh::destination_problem;

const HOST_KEYS: &[&str] = &["ssh", "fio", "device", "serve"];

/// One host of `[target]`: the fio server always, the SSH destination and device when named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// fio's `--client` address ("10.0.0.1", "10.0.0.1,8765", "ip:10.0.0.1,8765").
    pub(crate) fio: String,
    /// The SSH destination of the host's agent; `None`: fio server only (the string form).
    pub ssh: Option<String>,
    /// This host's device (without /dev/); `None`: [target] device.
    pub(crate) device: Option<String>,
    /// Where the host's agent starts a confined fio server for the run (`hosts::fio_server`),
    /// on the host's own address: `serve = true` is the `fio` address, a string another (the
    /// host's side of a port forward); `None`: the user runs the server.
    pub(crate) serve: Option<String>,
    /// The line the host is named on, for messages at run time.
    pub(crate) line: usize,
    /// Named in the string form (`hosts = [...]`), which names a fio server only.
    pub(crate) listed: bool,
}

/// Addresses that name no one host: a fio server bound to them listens on every interface.
const ANY_ADDRESS: &[&str] = &["0.0.0.0", "::", "[::]", "*", ""];

/// fio's default server port.
pub(crate) const FIO_PORT: u16 = 8765;

/// The address family fio resolves a server address in (`ip6:` IPv6; `ip:`, `ip4:` and no
/// prefix IPv4), and the address without its prefix.
pub(crate) fn fio_family(address: &str) -> (IpFamily, &str) {
    for (prefix, family) in [
        ("ip6:", IpFamily::V6),
        ("ip4:", IpFamily::V4),
        ("ip:", IpFamily::V4),
    ] {
        if let Some(bare) = address.strip_prefix(prefix) {
            return (family, bare);
        }
    }
    (IpFamily::V4, address)
}

/// An address family a fio address may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IpFamily {
    V4,
    V6,
}

/// The host and port a fio server address names ("ip:10.0.0.1,8765" -> ("10.0.0.1", 8765),
/// "[::1]" -> ("::1", 8765)): fio's default port when none is given.
pub(crate) fn fio_endpoint(address: &str) -> Result<(&str, u16), String> {
    let bare = fio_family(address).1;
    let (host, port) = match bare.rsplit_once(',') {
        Some((h, p)) => (h, p.parse().map_err(|_| format!("`{p}` is not a port"))?),
        None => (bare, FIO_PORT),
    };
    Ok((host.trim_start_matches('[').trim_end_matches(']'), port))
}

/// One spelling for the server an address names, so that "10.0.0.1" and "ip:10.0.0.1,8765"
/// count as the same server.
pub(crate) fn fio_server_key(address: &str) -> String {
    match fio_endpoint(address) {
        Ok((host, port)) => format!("{},{port}", host.to_ascii_lowercase()),
        Err(_) => address.to_string(),
    }
}

/// Why `address` is not a fio server address a client can name, if it is not.
pub(crate) fn fio_address_problem(address: &str) -> Option<String> {
    if !address
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".:,-_[]".contains(c))
    {
        return Some(format!("`{address}` is not a fio server address"));
    }
    let bare = fio_family(address).1;
    let (host, port) = match bare.rsplit_once(',') {
        Some((h, p)) => (h, Some(p)),
        None => (bare, None),
    };
    if let Some(p) = port {
        if !p.parse::<u16>().is_ok_and(|n| n > 0) {
            return Some(format!("`{address}`: `{p}` is not a port (1 to 65535)"));
        }
    }
    if ANY_ADDRESS.contains(&host) || host.starts_with('-') {
        return Some(format!(
            "`{address}` names no host: a fio server must listen on an address of its own, \
             never on all interfaces (fio's server protocol has no authentication)"
        ));
    }
    None
}

/// Whether two fio addresses name one server, however each is written.
pub(super) fn same_server(a: &str, b: &str) -> bool {
    fio_server_key(a) == fio_server_key(b)
}

/// A fio server named twice, in one spelling or two.
pub(super) fn twice(first: &str, again: &str) -> String {
    if first == again {
        format!("fio server `{again}` is named twice")
    } else {
        format!("fio server `{again}` is named twice (as `{first}` before)")
    }
}

impl Walker<'_> {
    /// `[[target.host]]` (an array of tables): each host once, by fio address and by ssh.
    pub(super) fn host_tables(&mut self, v: &Value) -> Option<Vec<HostSpec>> {
        let example = "[[target.host]]\nssh = \"lab1\"\nfio = \"10.0.0.1,8765\"\ndevice = \"sdb\"";
        let DeValue::Array(items) = v.get_ref() else {
            self.expected(v, "tables ([[target.host]])", "host");
            return None;
        };
        let mut out: Vec<HostSpec> = Vec::new();
        for item in items {
            let Some(h) = self.host_table(item, example) else {
                continue;
            };
            let span = item.span();
            if let Some(o) = out.iter().find(|o| same_server(&o.fio, &h.fio)) {
                self.error(span, twice(&o.fio, &h.fio), None);
            } else if let Some(s) = h
                .ssh
                .as_ref()
                .filter(|s| out.iter().any(|o| o.ssh.as_deref() == Some(s.as_str())))
            {
                self.error(span, format!("ssh host `{s}` is named twice"), None);
            } else {
                out.push(h);
            }
        }
        (!out.is_empty()).then_some(out)
    }

    fn host_table(&mut self, item: &Value, example: &str) -> Option<HostSpec> {
        let DeValue::Table(table) = item.get_ref() else {
            self.expected(item, "a table ([[target.host]])", "host");
            return None;
        };
        let (line, _) = self.position(item.span().start);
        let mut fio = None;
        let mut ssh = None;
        let mut device = None;
        let mut serve: Option<Option<String>> = None;
        let mut bad = false;
        for (key, value) in table.iter() {
            let checked = |w: &mut Self, problem: fn(&str) -> Option<String>, allowed: &str| {
                let s = w.nonempty_string(value, key.get_ref())?;
                let s = s.trim().to_string();
                match problem(&s) {
                    Some(p) => {
                        w.error(value.span(), p, Some(allowed.to_string()));
                        None
                    }
                    None => Some(s),
                }
            };
            match key.get_ref().as_ref() {
                "fio" => {
                    fio = checked(self, fio_address_problem, "\"10.0.0.1\", \"10.0.0.1,8765\"");
                    bad |= fio.is_none();
                }
                "ssh" => {
                    ssh = checked(self, destination_problem, "\"lab1\", \"root@10.0.0.1\"");
                    bad |= ssh.is_none();
                }
                "device" => {
                    device = self.host_device(value);
                    bad |= device.is_none();
                }
                "serve" => {
                    serve = match value.get_ref() {
                        DeValue::Boolean(b) => Some(b.then_some(String::new())),
                        DeValue::String(_) => {
                            checked(self, fio_address_problem, "\"10.0.2.15,8765\"").map(Some)
                        }
                        _ => {
                            self.expected(value, "true, false or an address", "serve");
                            None
                        }
                    };
                    bad |= serve.is_none();
                }
                other => self.unknown_key(key.span(), other, "[[target.host]]", HOST_KEYS),
            }
        }
        if fio.is_none() && !bad {
            self.error(
                item.span(),
                "this [[target.host]] names no fio server (`fio`)".to_string(),
                Some(example.to_string()),
            );
        }
        let serve = serve.flatten();
        if serve.is_some() && ssh.is_none() {
            self.error(
                item.span(),
                "`serve` needs `ssh`: the host's agent starts the fio server".to_string(),
                Some(example.to_string()),
            );
            return None;
        }
        let fio = fio?;
        if bad {
            // Said above; kept, the host would add errors of its own (a host whose device
            // was refused would be taken for one that names none).
            return None;
        }
        Some(HostSpec {
            serve: serve.map(|s| if s.is_empty() { fio.clone() } else { s }),
            fio,
            ssh,
            device,
            line,
            listed: false,
        })
    }

    /// A host's own device: a name, never the default scratch device (it is this machine's).
    fn host_device(&mut self, value: &Value) -> Option<String> {
        let d = self.nonempty_string(value, "device")?;
        let span: Range<usize> = value.span();
        match self.device_name(&d, span.clone(), false)? {
            Some(name) => Some(name),
            None => {
                self.error(
                    span,
                    "a host's `device` is a device on that host; the default scratch device \
                     is this machine's"
                        .to_string(),
                    Some("device = \"loop5\", \"nvme0n1\"".to_string()),
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{fio_address_problem, fio_server_key};
    use crate::experiment::file::parse;

    fn errors(text: &str) -> String {
        match parse("x.toml", text) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn host_tables_name_ssh_fio_and_device_per_host() {
        let e = parse(
            "x.toml",
            "name = \"n\"\n[target]\ndevice = \"sdb\"\nhosts = [\"10.0.0.9\"]\n\
             [[target.host]]\nssh = \"lab1\"\nfio = \"10.0.0.1,8765\"\ndevice = \"loop5\"\n\
             [[target.host]]\nssh = \"root@10.0.0.2\"\nfio = \"ip:10.0.0.2\"\n\
             [factors]\nbs = [\"4k\", \"8k\"]\n",
        )
        .unwrap();
        // Both forms: every fio server in `hosts`, the string form without control.
        assert_eq!(
            e.target.hosts,
            vec!["10.0.0.9", "10.0.0.1,8765", "ip:10.0.0.2"]
        );
        let specs = &e.target.host_specs;
        assert_eq!(specs.len(), 3);
        assert_eq!(
            (specs[0].ssh.as_deref(), specs[0].device.as_deref()),
            (None, None)
        );
        assert_eq!(specs[1].ssh.as_deref(), Some("lab1"));
        assert_eq!(specs[1].device.as_deref(), Some("loop5"));
        assert_eq!(specs[1].line, 5);
        assert_eq!(specs[2].ssh.as_deref(), Some("root@10.0.0.2"));
        assert_eq!(specs[2].device, None);
    }

    /// `serve = true` serves on the `fio` address, a string on its own; false, as absent,
    /// leaves the server to the user.
    #[test]
    fn serve_names_where_the_agent_starts_the_fio_server() {
        let host = |serve: &str| {
            format!("[[target.host]]\nssh = \"lab1\"\nfio = \"127.0.0.1,8801\"\n{serve}\n")
        };
        let served = |serve: &str| {
            let text = format!("name = \"n\"\n[target]\ndevice = \"sdb\"\n{}", host(serve));
            parse("x.toml", &text).unwrap().target.host_specs[0]
                .serve
                .clone()
        };
        assert_eq!(served("serve = true").as_deref(), Some("127.0.0.1,8801"));
        assert_eq!(
            served("serve = \"10.0.2.15,8765\"").as_deref(),
            Some("10.0.2.15,8765")
        );
        assert_eq!(served("serve = false"), None);
        assert_eq!(served(""), None);
        let text = errors(
            "name = \"n\"\n[target]\ndevice = \"sdb\"\n\
             [[target.host]]\nfio = \"10.0.0.1\"\nserve = true\n\
             [[target.host]]\nssh = \"lab2\"\nfio = \"10.0.0.2\"\nserve = \"0.0.0.0\"\n\
             [[target.host]]\nssh = \"lab3\"\nfio = \"10.0.0.3\"\nserve = 1\n",
        );
        assert!(
            text.contains(
                "x.toml:4:1: `serve` needs `ssh`: the host's agent starts the fio server"
            ),
            "{text}"
        );
        assert!(
            text.contains("x.toml:10:9: `0.0.0.0` names no host"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:14:9: `serve` must be true, false or an address, not"),
            "{text}"
        );
    }

    #[test]
    fn host_table_problems_name_their_line() {
        let text = errors(
            "name = \"n\"\n[target]\ndevice = \"sdb\"\n\
             [[target.host]]\nssh = \"-oProxyCommand=x\"\nfio = \"0.0.0.0,8765\"\n\
             [[target.host]]\nssh = \"lab2\"\nfio = \"10.0.0.2,99999\"\ndevic = \"x\"\n\
             [[target.host]]\nssh = \"lab3\"\n\
             [[target.host]]\nssh = \"lab3\"\nfio = \"10.0.0.4\"\ndevice = \"default\"\n",
        );
        assert!(
            text.contains("x.toml:5:7: `-oProxyCommand=x` would be read by ssh as an option"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:6:7: `0.0.0.0,8765` names no host"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:9:7: `10.0.0.2,99999`: `99999` is not a port"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:10:1: unknown key `devic` in [[target.host]]"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:11:1: this [[target.host]] names no fio server"),
            "{text}"
        );
        assert!(
            text.contains("x.toml:16:10: a host's `device` is a device on that host"),
            "{text}"
        );
    }

    /// A host whose device is refused is not also taken for one that names none ("the default
    /// scratch device does not exist" on the hosts).
    #[test]
    fn a_refused_host_device_is_said_once() {
        let text = errors(
            "name = \"n\"\n[workload]\nrw = \"read\"\n\
             [[target.host]]\nssh = \"a\"\nfio = \"10.0.0.1\"\ndevice = \"../../dev/loop0\"\n",
        );
        assert!(
            text.contains("x.toml:7:10: `../../dev/loop0` is not a block device name"),
            "{text}"
        );
        assert!(!text.contains("scratch device does not exist"), "{text}");
        // Nor offered the default scratch device, which is this machine's.
        assert!(!text.contains("\"default\""), "{text}");
    }

    /// One server written two ways ("10.0.0.1" and "ip:10.0.0.1,8765") was taken for two: one
    /// host's job ran on the other's server, on a device nobody named for that host.
    #[test]
    fn one_fio_server_written_two_ways_is_named_twice() {
        let text = errors(
            "name = \"n\"\n[target]\ndevice = \"sdb\"\nhosts = [\"lab9\", \"LAB9,8765\"]\n\
             [[target.host]]\nfio = \"10.0.0.1\"\n\
             [[target.host]]\nfio = \"ip:10.0.0.1,8765\"\n\
             [[target.host]]\nfio = \"ip:lab9\"\n",
        );
        for want in [
            "x.toml:4:18: host `LAB9,8765` is listed twice (as `lab9` before)",
            "x.toml:7:1: fio server `ip:10.0.0.1,8765` is named twice (as `10.0.0.1` before)",
            "x.toml:9:1: fio server `ip:lab9` is also in `hosts` (as `lab9`)",
        ] {
            assert!(text.contains(want), "{want:?} not in {text}");
        }
        assert_eq!(fio_server_key("[FE80::1]"), "fe80::1,8765");
        assert_eq!(fio_server_key("ip6:fe80::1,8765"), "fe80::1,8765");
        assert_eq!(
            fio_server_key("ip4:10.0.0.1"),
            fio_server_key("10.0.0.1,8765")
        );
        assert!(fio_address_problem("ip4:0.0.0.0").is_some());
        assert_ne!(fio_server_key("10.0.0.1"), fio_server_key("10.0.0.1,8766"));
    }

    #[test]
    fn hosts_with_their_own_devices_need_no_target_device_and_may_vary_knobs() {
        let file = "name = \"n\"\n\
             [[target.host]]\nssh = \"a\"\nfio = \"10.0.0.1\"\ndevice = \"loop5\"\n\
             [[target.host]]\nssh = \"b\"\nfio = \"10.0.0.2\"\ndevice = \"loop6\"\n\
             [factors]\nnr_requests = [32, 64]\nplacement = [\"on\", \"far\"]\n";
        let e = parse("x.toml", file).unwrap();
        assert_eq!(e.target.host_specs.len(), 2);
        // A host without ssh cannot have its knobs set, nor one without its own device run.
        let text = errors(&file.replace("ssh = \"b\"\n", ""));
        assert!(
            text.contains("factor `nr_requests` changes this machine"),
            "{text}"
        );
        let text = errors(&file.replace("device = \"loop6\"\n", ""));
        assert!(
            text.contains("the default scratch device does not exist"),
            "{text}"
        );
    }

    #[test]
    fn fio_addresses() {
        for ok in [
            "10.0.0.1",
            "lab1,8765",
            "ip:10.0.0.2,8765",
            "ip6:fe80::1,8765",
        ] {
            assert_eq!(fio_address_problem(ok), None, "{ok}");
        }
        for bad in [
            "0.0.0.0",
            "::",
            "ip:0.0.0.0,8765",
            ",8765",
            "a;b",
            "h,0",
            "-x",
        ] {
            assert!(fio_address_problem(bad).is_some(), "{bad}");
        }
    }
}

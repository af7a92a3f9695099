//! Which fio options an experiment file may use, and what they imply. An experiment file is
//! code someone hands you: iolab refuses options that make fio run programs or load shared
//! objects, that send I/O to files other than the checked target, or that change kernel knobs
//! behind the journal's back. It also says whether a workload writes, so the target check can
//! refuse writes to devices that hold data. Names are checked against fio 3.33's own list
//! (`fio_options.txt`) so a typo is caught before anything runs, with a suggestion.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// fio's option names and aliases, generated from the installed fio (see the file's header).
const FIO_OPTIONS_TXT: &str = include_str!("fio_options.txt");

/// I/O engines compiled into (or packaged with) fio 3.33; any other name would make fio try to
/// `dlopen` it as a shared object.
pub const KNOWN_ENGINES: &[&str] = &[
    "cpuio",
    "mmap",
    "sync",
    "psync",
    "vsync",
    "pvsync",
    "pvsync2",
    "null",
    "net",
    "netsplice",
    "ftruncate",
    "filecreate",
    "filestat",
    "filedelete",
    "exec",
    "posixaio",
    "falloc",
    "e4defrag",
    "splice",
    "gfapi",
    "gfapi_async",
    "mtd",
    "sg",
    "io_uring",
    "io_uring_cmd",
    "nbd",
    "libaio",
    "rdma",
    "rados",
    "rbd",
    "pmemblk",
    "dev-dax",
    "libpmem",
];

/// Engines that modify files or their layout whatever `rw` says.
const WRITING_ENGINES: &[&str] = &[
    "ftruncate",
    "filecreate",
    "filedelete",
    "falloc",
    "e4defrag",
];

/// Engines that support polled completions (`hipri`).
pub const POLLING_ENGINES: &[&str] = &["io_uring", "io_uring_cmd", "pvsync2"];

/// `rw` values that write (or trim, which destroys data just as well).
const WRITING_RW: &[&str] = &[
    "write",
    "randwrite",
    "rw",
    "readwrite",
    "randrw",
    "trim",
    "randtrim",
    "trimwrite",
    "randtrimwrite",
];

/// Options iolab sets itself from the experiment; a user value would bypass its checks.
pub const SET_BY_IOLAB: &[(&str, &str)] = &[
    (
        "filename",
        "the target comes from [target]; iolab checks it before any I/O",
    ),
    (
        "directory",
        "the target comes from [target]; iolab checks it before any I/O",
    ),
    (
        "filename_format",
        "the target comes from [target]; iolab checks it before any I/O",
    ),
    (
        "opendir",
        "the target comes from [target]; iolab checks it before any I/O",
    ),
    ("name", "iolab names the job after the experiment cell"),
];

/// Options that iolab allows only where a placement factor does not set them.
pub const PLACEMENT_OPTIONS: &[&str] = &[
    "cpus_allowed",
    "cpus_allowed_policy",
    "cpumask",
    "numa_cpu_nodes",
];

/// What the caller has explicitly allowed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptionPolicy {
    /// Options that run programs or load code (`allow_exec = true` in the experiment file).
    pub allow_exec: bool,
    /// Options that defeat fio's own protection of mounted devices.
    pub allow_destructive: bool,
    /// Accept option names that fio 3.33 does not know (a newer fio on another host).
    pub allow_unknown: bool,
}

/// Why an option was refused; the message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("`{name}` makes fio {what}; refused unless the experiment sets `allow_exec = true`")]
    RunsCode { name: String, what: String },
    #[error("`{name}` {why}; iolab refuses it")]
    Bypasses { name: String, why: String },
    #[error("`{name}` is set by iolab: {why}")]
    SetByIolab { name: String, why: String },
    #[error("`{name}` is not an option of fio 3.33{suggestion}")]
    Unknown { name: String, suggestion: String },
    #[error("`{name}`: {why}")]
    BadSyntax { name: String, why: String },
}

struct Catalogue {
    names: Vec<&'static str>,
    aliases: BTreeMap<&'static str, &'static str>,
}

fn catalogue() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        let mut names = Vec::new();
        let mut aliases = BTreeMap::new();
        for line in FIO_OPTIONS_TXT.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match line.split_once(' ') {
                Some((alias, canonical)) => {
                    aliases.insert(alias, canonical.trim());
                }
                None => names.push(line),
            }
        }
        Catalogue { names, aliases }
    })
}

/// The canonical name of an option (`readwrite` -> `rw`, `blocksize` -> `bs`).
pub fn canonical(name: &str) -> &str {
    catalogue().aliases.get(name).copied().unwrap_or(name)
}

/// True for a name (or alias) fio 3.33 accepts.
pub fn is_fio_option(name: &str) -> bool {
    let c = catalogue();
    c.aliases.contains_key(name) || c.names.contains(&name)
}

/// The closest known name, for "did you mean" messages.
pub fn suggest(name: &str) -> Option<&'static str> {
    let c = catalogue();
    crate::suggest::closest(name, c.names.iter().chain(c.aliases.keys()).copied())
}

/// Checks one `name=value` pair of a workload. The value is fio's text form.
pub fn check_option(name: &str, value: &str, policy: &OptionPolicy) -> Result<(), Refusal> {
    let bad = |why: &str| Refusal::BadSyntax {
        name: name.to_string(),
        why: why.to_string(),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        return Err(bad(
            "an option name is lower-case letters, digits, '_' or '-'",
        ));
    }
    if value.contains(['\n', '\r', '\0']) {
        return Err(bad(
            "a value must be one line (a line break would start a new job-file entry)",
        ));
    }
    let canon = canonical(name);
    let runs = |what: &str| Refusal::RunsCode {
        name: name.to_string(),
        what: what.to_string(),
    };
    let bypass = |why: &str| Refusal::Bypasses {
        name: name.to_string(),
        why: why.to_string(),
    };
    match canon {
        "exec_prerun" | "exec_postrun" if !policy.allow_exec => {
            return Err(runs("run a shell command through system(3)"))
        }
        "program" | "arguments" | "grace_time" | "std_redirect" if !policy.allow_exec => {
            return Err(runs("run a program (options of the `exec` engine)"))
        }
        "trigger" | "trigger-file" | "trigger-timeout" | "trigger-remote" | "trigger_file"
        | "trigger_timeout" | "trigger_remote"
            if !policy.allow_exec =>
        {
            return Err(runs("run a trigger command"))
        }
        "ioengine" => check_engine(name, value, policy)?,
        "ioscheduler" => {
            return Err(bypass(
                "switches the device's I/O scheduler outside iolab's knob journal, so it would \
                 not be restored; use the `scheduler` factor instead",
            ))
        }
        "read_iolog" | "replay_redirect" | "merge_blktrace_file" => {
            return Err(bypass(
                "replays I/O onto the devices named in a log, not the checked target",
            ))
        }
        "write_iolog" => {
            return Err(bypass(
                "appends to an arbitrary path outside the run's own files; use the block trace \
                 recording of iolab instead",
            ))
        }
        "unlink" | "unlink_each_loop" => {
            return Err(bypass(
                "deletes the target file, which for a block device is its device node",
            ))
        }
        "allow_mounted_write" if !policy.allow_destructive => {
            return Err(bypass(
                "disables fio's refusal to write to mounted devices (needs the explicit \
                 destructive option)",
            ))
        }
        _ => {}
    }
    if let Some((_, why)) = SET_BY_IOLAB.iter().find(|(n, _)| *n == canon) {
        return Err(Refusal::SetByIolab {
            name: name.to_string(),
            why: why.to_string(),
        });
    }
    if !policy.allow_unknown && !is_fio_option(name) && !name.starts_with("trigger") {
        return Err(Refusal::Unknown {
            name: name.to_string(),
            suggestion: suggest(name)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default(),
        });
    }
    Ok(())
}

fn check_engine(name: &str, value: &str, policy: &OptionPolicy) -> Result<(), Refusal> {
    let engine = value.trim();
    if engine.starts_with("external") || engine.contains('/') {
        if policy.allow_exec {
            return Ok(());
        }
        return Err(Refusal::RunsCode {
            name: format!("{name}={engine}"),
            what: "load a shared object into its process (external engine)".to_string(),
        });
    }
    if engine == "exec" && !policy.allow_exec {
        return Err(Refusal::RunsCode {
            name: format!("{name}={engine}"),
            what: "run a program (the `exec` engine)".to_string(),
        });
    }
    if !KNOWN_ENGINES.contains(&engine) && !policy.allow_exec {
        return Err(Refusal::RunsCode {
            name: format!("{name}={engine}"),
            what: format!(
                "look for a shared object named after an engine it does not know; known \
                 engines: {}",
                KNOWN_ENGINES.join(", ")
            ),
        });
    }
    Ok(())
}

/// Why a set of options writes to its target, or `None` for a read-only workload. Reads the
/// last value of each option as fio would; `rw` defaults to `read`. Conservative: a mixed
/// workload writes even at `rwmixread=100`.
pub fn writes<'a>(options: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<String> {
    let mut rw = "read";
    let mut engine = None;
    for (name, value) in options {
        match canonical(name) {
            "rw" => rw = value,
            "ioengine" => engine = Some(value),
            _ => {}
        }
    }
    // `rw=randread:8` carries an offset modifier after the colon.
    let mode = rw.split(':').next().unwrap_or("").trim();
    if WRITING_RW.contains(&mode) {
        return Some(format!("rw={rw} writes to the target"));
    }
    if let Some(e) = engine
        .map(str::trim)
        .filter(|e| WRITING_ENGINES.contains(e))
    {
        return Some(format!("ioengine={e} modifies the target"));
    }
    None
}

/// A fio time value in seconds: plain numbers are seconds; suffixes us, ms, s, m, h, d.
pub fn parse_duration_secs(text: &str) -> Option<f64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let number: f64 = t[..split].parse().ok()?;
    let scale = match t[split..].trim() {
        "" | "s" | "sec" => 1.0,
        "us" | "usec" => 1e-6,
        "ms" | "msec" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    };
    Some(number * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: OptionPolicy = OptionPolicy {
        allow_exec: false,
        allow_destructive: false,
        allow_unknown: false,
    };

    #[test]
    fn catalogue_has_options_and_aliases() {
        assert!(is_fio_option("iodepth"));
        assert!(is_fio_option("hipri"));
        assert!(is_fio_option("readwrite"));
        assert_eq!(canonical("readwrite"), "rw");
        assert_eq!(canonical("blocksize"), "bs");
        assert!(!is_fio_option("iodeph"));
        assert_eq!(suggest("iodeph"), Some("iodepth"));
        assert_eq!(suggest("zzzzzzzzzzzz"), None);
    }

    #[test]
    fn plain_options_pass() {
        for (n, v) in [
            ("rw", "randread"),
            ("bs", "4k"),
            ("iodepth", "32"),
            ("ioengine", "io_uring"),
            ("direct", "1"),
            ("time_based", "1"),
            ("write_lat_log", "lat"),
        ] {
            check_option(n, v, &DEFAULT).unwrap();
        }
    }

    #[test]
    fn code_execution_is_refused_unless_allowed() {
        for (n, v) in [
            ("exec_prerun", "rm -rf /"),
            ("exec_postrun", "true"),
            ("ioengine", "external:/tmp/x.so"),
            ("ioengine", "/tmp/x.so"),
            ("ioengine", "exec"),
            ("ioengine", "nosuchengine"),
            ("program", "/bin/sh"),
            ("trigger-file", "/tmp/t"),
        ] {
            let e = check_option(n, v, &DEFAULT).unwrap_err();
            assert!(matches!(e, Refusal::RunsCode { .. }), "{n}={v}: {e:?}");
            assert!(e.to_string().contains("allow_exec"));
            let allowed = OptionPolicy {
                allow_exec: true,
                ..DEFAULT
            };
            check_option(n, v, &allowed).unwrap();
        }
    }

    #[test]
    fn options_that_bypass_checks_are_refused() {
        for n in [
            "ioscheduler",
            "read_iolog",
            "write_iolog",
            "replay_redirect",
            "unlink",
        ] {
            let e = check_option(n, "x", &DEFAULT).unwrap_err();
            assert!(matches!(e, Refusal::Bypasses { .. }), "{n}: {e:?}");
        }
        assert!(check_option("ioscheduler", "none", &DEFAULT)
            .unwrap_err()
            .to_string()
            .contains("`scheduler` factor"));
        assert!(matches!(
            check_option("filename", "/dev/vda", &DEFAULT),
            Err(Refusal::SetByIolab { .. })
        ));
        assert!(check_option("allow_mounted_write", "1", &DEFAULT).is_err());
    }

    #[test]
    fn syntax_and_unknown_names() {
        assert!(matches!(
            check_option("bs", "4k\n[evil]", &DEFAULT),
            Err(Refusal::BadSyntax { .. })
        ));
        assert!(matches!(
            check_option("b s", "4k", &DEFAULT),
            Err(Refusal::BadSyntax { .. })
        ));
        let e = check_option("iodeph", "4", &DEFAULT).unwrap_err();
        assert!(e.to_string().contains("did you mean `iodepth`"), "{e}");
        let newer = OptionPolicy {
            allow_unknown: true,
            ..DEFAULT
        };
        check_option("iodeph", "4", &newer).unwrap();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_secs("10"), Some(10.0));
        assert_eq!(parse_duration_secs("10s"), Some(10.0));
        assert_eq!(parse_duration_secs("2m"), Some(120.0));
        assert_eq!(parse_duration_secs("500ms"), Some(0.5));
        assert_eq!(parse_duration_secs("1x"), None);
    }

    #[test]
    fn write_detection() {
        assert_eq!(writes([]), None);
        assert_eq!(writes([("rw", "randread")]), None);
        assert_eq!(writes([("rw", "randread:8")]), None);
        assert!(writes([("rw", "randwrite")]).is_some());
        assert!(writes([("readwrite", "randrw"), ("rwmixread", "100")]).is_some());
        assert!(writes([("rw", "trim")]).is_some());
        assert!(writes([("rw", "write"), ("rw", "read")]).is_none());
        assert!(writes([("ioengine", "filedelete")]).is_some());
    }
}

//! Which fio options an experiment file may use: an allow-list. An experiment file is code
//! someone hands you, and fio has hundreds of options, many of which name files or programs
//! (`mem=mmap:PATH` truncates PATH, `write_*_log` writes anywhere, `exec_*` runs commands). So
//! every option fio 3.33 has is listed in `fio_options.txt` (written by `scripts/fio-catalogue`
//! from fio's own help) and gets a rule here: a typed value (a number, a duration, one of fio's
//! listed choices, a CPU list, ...) whose shape cannot name a file; a log-name prefix confined to
//! the run's own directory; allowed only with `allow_exec = true`; set by iolab; or refused with
//! the reason. An option with no rule is refused, so a new fio option is refused until someone
//! decides what it may do. Unknown names are refused with a suggestion unless the experiment
//! says `allow_unknown_fio_options = true`. It also says whether a workload writes, so the
//! target check can refuse writes to devices that hold data.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Every fio option with its type, aliases and choices (see the file's header).
const FIO_OPTIONS_TXT: &str = include_str!("fio_options.txt");

/// The longest job-file line fio reads whole: it reads a job file (and `--parse-only -`) with
/// `fgets` into 8,192 bytes (fio's OPT_LEN_MAX), so the rest of a longer line comes back as a
/// line of its own: an option, an `include` or a section iolab never checked.
pub(crate) const FIO_LINE_MAX: usize = 8190;

/// The longest `name=value` iolab accepts from a workload: no fio option needs more than a
/// path's length, and half of fio's line leaves room for what iolab adds.
pub(crate) const OPTION_LINE_MAX: usize = 4096;

/// Engines that do block I/O on the target device, the only kind iolab allows, and `null`,
/// which does no I/O at all and touches nothing (what fio itself costs per I/O). fio's other
/// engines work on files (filecreate, filedelete, ftruncate, falloc, e4defrag), the network
/// (net, rdma, nbd, rbd, rados, gfapi), memory devices or the CPU; `exec` and external engines
/// run code.
pub(crate) const BLOCK_ENGINES: &[&str] = &[
    "sync",
    "psync",
    "vsync",
    "pvsync",
    "pvsync2",
    "io_uring",
    "io_uring_cmd",
    "libaio",
    "posixaio",
    "mmap",
    "splice",
    "sg",
    "null",
];

/// fio's engines that do something other than block I/O on the target (besides `exec`).
const OTHER_ENGINES: &[&str] = &[
    "cpuio",
    "net",
    "netsplice",
    "ftruncate",
    "filecreate",
    "filestat",
    "filedelete",
    "falloc",
    "e4defrag",
    "gfapi",
    "gfapi_async",
    "mtd",
    "nbd",
    "rdma",
    "rados",
    "rbd",
    "pmemblk",
    "dev-dax",
    "libpmem",
];

/// Engines that support polled completions (`hipri`).
pub(crate) const POLLING_ENGINES: &[&str] = &["io_uring", "io_uring_cmd", "pvsync2"];

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

const TARGET_IS_IOLABS: &str = "the target comes from [target]; iolab checks it before any I/O";

/// Options iolab sets itself from the experiment; a user value would bypass its checks.
pub(crate) const SET_BY_IOLAB: &[(&str, &str)] = &[
    ("filename", TARGET_IS_IOLABS),
    ("directory", TARGET_IS_IOLABS),
    ("filename_format", TARGET_IS_IOLABS),
    ("opendir", TARGET_IS_IOLABS),
    ("name", "iolab names the job after the experiment cell"),
];

/// Options that iolab allows only where a placement factor does not set them.
pub(crate) const PLACEMENT_OPTIONS: &[&str] = &[
    "cpus_allowed",
    "cpus_allowed_policy",
    "cpumask",
    "numa_cpu_nodes",
];

/// Options whose value is a file-name prefix for fio's per-I/O logs. Allowed as a plain name:
/// fio runs in a directory iolab owns for the run, so the logs land there.
pub(crate) const LOG_NAME_OPTIONS: &[&str] = &[
    "write_bw_log",
    "write_lat_log",
    "write_iops_log",
    "write_hist_log",
];

/// What the caller has explicitly allowed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptionPolicy {
    /// Options that run programs or load code (`allow_exec = true` in the experiment file).
    pub(crate) allow_exec: bool,
    /// Options that defeat fio's own protection of mounted devices.
    pub(crate) allow_destructive: bool,
    /// Accept option names that fio 3.33 does not know (a newer fio on another host).
    pub(crate) allow_unknown: bool,
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
    #[error("`{name}` = {value:?}: expected {expected}")]
    BadValue {
        name: String,
        value: String,
        expected: String,
    },
}

/// How iolab treats one fio option: the allow-list's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Allowed when the value has this shape.
    Value(Shape),
    /// A log file-name prefix: allowed as a plain name, written in the run's own directory.
    LogName,
    /// Runs a program or loads code: allowed only with `allow_exec = true`.
    Exec(&'static str),
    /// Disables fio's refusal to write to mounted devices: only with the destructive option.
    Destructive,
    /// The I/O engine: one of `BLOCK_ENGINES` (others run code or touch other things).
    Engine,
    /// iolab sets it itself.
    SetByIolab(&'static str),
    /// Refused; says why and what to use instead.
    Refused(&'static str),
}

/// The shapes a value may have. None of them can spell a path: numbers carry at most a unit,
/// choices are fio's own words, lists hold digits and separators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Empty (fio's valueless boolean), 0/1, true/false, yes/no, on/off.
    Bool,
    /// Numbers with an optional unit or `%`, in lists (`,` `:`) or ranges (`-`): `4k`,
    /// `4k,64k`, `1k-4k`, `50%`, `0x1f`, `-1`, and fio's `$ncpus`, `$mb_memory`, `$pagesize`.
    Number,
    /// One time from 0 to 30 days (`sys::parse::duration`): `10s`, `500ms`, `2m`, `30`.
    Duration,
    /// Floating-point numbers separated by `:` (percentile lists).
    Floats,
    /// Block-size splits: sizes and percentages joined by `/`, `:` and `,` (`4k/10:64k/90`).
    SizeSplit,
    /// One of the choices fio lists for the option; with `modifier`, optionally followed by
    /// `:` and digits (`randread:8`, `zipf:1.2`, `zoned:60/10:40/90`, `iops:1%`).
    Choice { modifier: bool },
    /// A CPU or node list: digits, `,` and `-`.
    CpuList,
    /// `default`, `local`, or `prefer|bind|interleave:NODES`.
    NumaPolicy,
    /// Error names or numbers: letters, digits, `,` and `:` (`EIO,ENOSPC:5`).
    ErrorList,
    /// A buffer or verify pattern: hex (`0xdeadbeef`), decimal, `"quoted text"` and `%o`; a
    /// pattern read from a file (`'name'`) is refused.
    Pattern,
    /// Lower-case words, digits, `,`, `:` and `_` (`read,write`, `wait_before,write`).
    Words,
    /// Free text fio only prints (a job description): anything without control characters.
    Text,
}

/// What fio says about one of its options.
struct FioOption {
    /// fio's type, as `scripts/fio-catalogue` normalises it: bool, int, range, size, size_str,
    /// float_list, time, str.
    kind: &'static str,
    /// The choices fio lists, if any.
    values: Vec<&'static str>,
}

struct Catalogue {
    options: BTreeMap<&'static str, FioOption>,
    aliases: BTreeMap<&'static str, &'static str>,
}

fn catalogue() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        let mut options = BTreeMap::new();
        let mut aliases = BTreeMap::new();
        let list = |s: &'static str| -> Vec<&'static str> {
            if s == "-" {
                Vec::new()
            } else {
                s.split(',').collect()
            }
        };
        for line in FIO_OPTIONS_TXT.lines() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let cols: Vec<&'static str> = line.split('\t').collect();
            let [name, kind, alias, values, _engines] = cols[..] else {
                panic!("fio_options.txt: malformed line {line:?}");
            };
            for a in list(alias) {
                aliases.insert(a, name);
            }
            options.insert(
                name,
                FioOption {
                    kind,
                    values: list(values),
                },
            );
        }
        Catalogue { options, aliases }
    })
}

/// The canonical name of an option (`readwrite` -> `rw`, `blocksize` -> `bs`).
pub(crate) fn canonical(name: &str) -> &str {
    catalogue().aliases.get(name).copied().unwrap_or(name)
}

/// True for a name (or alias) fio 3.33 accepts.
pub fn is_fio_option(name: &str) -> bool {
    catalogue().options.contains_key(canonical(name))
}

/// Every option name fio 3.33 has (canonical names, sorted).
#[cfg(test)]
pub(crate) fn fio_option_names() -> impl Iterator<Item = &'static str> {
    catalogue().options.keys().copied()
}

/// The choices fio lists for an option (empty when it lists none).
pub(crate) fn choices(name: &str) -> &'static [&'static str] {
    catalogue()
        .options
        .get(canonical(name))
        .map_or(&[], |o| o.values.as_slice())
}

/// The closest known name, for "did you mean" messages.
pub(crate) fn suggest(name: &str) -> Option<&'static str> {
    let c = catalogue();
    crate::suggest::closest(name, c.options.keys().chain(c.aliases.keys()).copied())
}

/// The allow-list's rule for an option (canonical name or alias); `None` for a name fio does
/// not have, or an option of fio's that iolab has no rule for (refused).
pub fn rule(name: &str) -> Option<Rule> {
    let canon = canonical(name);
    explicit_rule(canon).or_else(|| {
        let o = catalogue().options.get(canon)?;
        match o.kind {
            "bool" => Some(Rule::Value(Shape::Bool)),
            "int" | "range" | "size" | "size_str" => Some(Rule::Value(Shape::Number)),
            "float_list" => Some(Rule::Value(Shape::Floats)),
            "time" => Some(Rule::Value(Shape::Duration)),
            "str" if !o.values.is_empty() => Some(Rule::Value(Shape::Choice { modifier: false })),
            // Free text: it may be a path, so it needs a rule of its own.
            _ => None,
        }
    })
}

/// Whether the option is a size or a count, which no negative value makes sense for: fio's
/// sizes and ranges, and the block sizes, depths, rates and counts it types as plain integers
/// (others of those, such as `nice`, take negative values).
fn never_negative(canon: &str) -> bool {
    const COUNTS: &[&str] = &[
        "bs",
        "ba",
        "filesize",
        "iodepth",
        "iodepth_batch",
        "iodepth_batch_complete_max",
        "iodepth_batch_complete_min",
        "iodepth_low",
        "loops",
        "number_ios",
        "numjobs",
        "offset_align",
        "rate",
        "rate_iops",
        "rate_iops_min",
        "rate_min",
        "thinktime",
    ];
    COUNTS.contains(&canon)
        || catalogue()
            .options
            .get(canon)
            .is_some_and(|o| matches!(o.kind, "size" | "range"))
}

/// Rules for the options fio types as free text, and for those whose type alone says too
/// little (a boolean that deletes the target, a choice that reads a file after a colon).
fn explicit_rule(canon: &str) -> Option<Rule> {
    use Rule::*;
    use Shape::*;
    if let Some((_, why)) = SET_BY_IOLAB.iter().find(|(n, _)| *n == canon) {
        return Some(SetByIolab(why));
    }
    if LOG_NAME_OPTIONS.contains(&canon) {
        return Some(LogName);
    }
    Some(match canon {
        "ioengine" => Engine,
        "exec_prerun" | "exec_postrun" => Exec("run a shell command through system(3)"),
        "program" | "arguments" | "grace_time" | "std_redirect" => {
            Exec("run a program (options of the `exec` engine)")
        }
        "allow_mounted_write" => Destructive,
        "ioscheduler" => Refused(
            "switches the device's I/O scheduler outside iolab's knob journal, so it would not \
             be restored; use the `scheduler` factor instead",
        ),
        "read_iolog" | "replay_redirect" | "merge_blktrace_file" => {
            Refused("replays I/O onto the devices named in a log, not the checked target")
        }
        "write_iolog" => {
            Refused("writes a log to any path; record block traces with `trace = true` instead")
        }
        "unlink" | "unlink_each_loop" => {
            Refused("deletes the target file, which for a block device is its device node")
        }
        "cgroup" | "cgroup_weight" | "cgroup_nodelete" => Refused(
            "makes fio create and remove cgroup directories outside the target; run iolab \
             itself in the cgroup instead",
        ),
        "profile" => Refused(
            "runs a built-in fio profile whose own options name files outside iolab's checks",
        ),
        // fio reads `mmap:PATH` / `mmaphuge:PATH` as a file to truncate and map.
        "mem" => Value(Choice { modifier: false }),
        "rw" | "random_distribution" | "file_service_type" | "steadystate" => {
            Value(Choice { modifier: true })
        }
        "description" => Value(Text),
        // iolab writes one job per target device, run at once, and sums their rates; a job
        // made to wait for another ran after it, and a sum of rates of different moments is
        // no rate the devices reached together.
        "stonewall" | "wait_for_previous" | "wait_for" => Refused(
            "makes a job wait for the one before it: iolab runs one job per target device at \
             once and sums their rates, which holds only for jobs that ran together; measure \
             phases that must follow each other as cells or experiments of their own",
        ),
        "bssplit" | "cmdprio_bssplit" => Value(SizeSplit),
        "randseed" | "filesize" | "number_ios" | "verify_backlog" | "trim_backlog" | "zonesize"
        | "zonecapacity" | "zonerange" | "lockmem" => Value(Number),
        "cpus_allowed" | "numa_cpu_nodes" | "log_compression_cpus" => Value(CpuList),
        "numa_mem_policy" => Value(NumaPolicy),
        "ignore_error" => Value(ErrorList),
        "buffer_pattern" | "verify_pattern" => Value(Pattern),
        "replay_skip" | "sync_file_range" => Value(Words),
        _ => return None,
    })
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
    if name.len() + 1 + value.len() > OPTION_LINE_MAX {
        return Err(bad(&format!(
            "`{name}=VALUE` must be at most {OPTION_LINE_MAX} bytes, not {}: fio reads a job \
             file in pieces of {FIO_LINE_MAX} bytes, and would read the rest of a longer line \
             as further options",
            name.len() + 1 + value.len()
        )));
    }
    let refused = |why: &str| Refusal::Bypasses {
        name: name.to_string(),
        why: why.to_string(),
    };
    // fio takes any job-file line that starts with `include` as a file to splice in, before it
    // parses options: that file's options would reach fio unchecked, unknown options allowed
    // or not.
    if name.starts_with("include") {
        return Err(refused(
            "makes fio read the named job file's options without iolab checking them (a job \
             file given as `[workload] job` may `include FILE` beside it)",
        ));
    }
    // fio puts the machine's figure in place of these keywords anywhere in an option's line,
    // and when the line then holds + - * or / it has `bc` compute it through a shell
    // (options.c, bc_calc).
    if !policy.allow_exec
        && FIO_KEYWORDS.iter().any(|k| value.contains(k))
        && (name.contains('-') || value.contains(['+', '-', '*', '/']))
    {
        return Err(Refusal::RunsCode {
            name: name.to_string(),
            what: format!(
                "run `bc` through a shell to compute {value:?} (one of {} with + - * or /); \
                 write the number instead",
                FIO_KEYWORDS.join(", ")
            ),
        });
    }
    // fio puts an environment variable in place of `${NAME}` anywhere in a line, after
    // iolab's check: the checked text would not be what runs, and the runner's environment
    // (a home directory, a token) would end up in the stored results. A job file's `${NAME}`
    // is expanded by iolab before the check (`job_file`); here there is nothing to expand it.
    if value.contains("${") {
        return Err(Refusal::BadValue {
            name: name.to_string(),
            value: value.to_string(),
            expected: "a value without `${NAME}` (fio would put the environment variable \
                       NAME of the machine it runs on there, unchecked): write the value itself"
                .to_string(),
        });
    }
    let value = fio_trim(value);
    let bad_value = |expected: String| Refusal::BadValue {
        name: name.to_string(),
        value: value.to_string(),
        expected,
    };
    let Some(rule) = rule(name) else {
        if is_fio_option(name) {
            return Err(refused(
                "takes free text that iolab has no rule for (it could name a file)",
            ));
        }
        if policy.allow_unknown {
            return Ok(());
        }
        return Err(Refusal::Unknown {
            name: name.to_string(),
            suggestion: suggest(name)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default(),
        });
    };
    match rule {
        Rule::Value(shape) => {
            if !shape.accepts(value, choices(name)) {
                return Err(bad_value(shape.describe(choices(name))));
            }
            // fio's parse check takes 0, then each run fails with "maximum number of jobs
            // reached", which says nothing of the cause.
            if canonical(name) == "numjobs" && value.trim().parse::<f64>().is_ok_and(|n| n < 1.0) {
                return Err(bad_value(
                    "at least 1 job (fio makes no job of 0 or fewer)".to_string(),
                ));
            }
            if let Some(whole) = shape.fraction_refused(value) {
                return Err(bad_value(whole));
            }
            if never_negative(canonical(name))
                && value.split([',', ':']).any(|item| item.starts_with('-'))
            {
                return Err(bad_value(
                    "a size or count of 0 or more: fio takes a negative one without a word \
                     and does something else (bs=-4k passes its own check, then does no I/O)"
                        .to_string(),
                ));
            }
        }
        Rule::LogName => {
            if !is_plain_name(value) {
                return Err(bad_value(
                    "a plain file-name prefix (letters, digits, '_', '-', '.'; no '/', and not \
                     '.' or '..'): fio writes the log into the run's own directory"
                        .to_string(),
                ));
            }
        }
        Rule::Exec(what) if !policy.allow_exec => {
            return Err(Refusal::RunsCode {
                name: name.to_string(),
                what: what.to_string(),
            })
        }
        Rule::Exec(_) => {}
        Rule::Destructive if !policy.allow_destructive => {
            return Err(refused(
                "disables fio's refusal to write to mounted devices (needs the explicit \
                 destructive option)",
            ))
        }
        Rule::Destructive => {}
        Rule::Engine => check_engine(name, value, policy)?,
        Rule::SetByIolab(why) => {
            return Err(Refusal::SetByIolab {
                name: name.to_string(),
                why: why.to_string(),
            })
        }
        Rule::Refused(why) => return Err(refused(why)),
    }
    Ok(())
}

fn check_engine(name: &str, value: &str, policy: &OptionPolicy) -> Result<(), Refusal> {
    let engine = fio_trim(value);
    let runs = |what: &str| Refusal::RunsCode {
        name: format!("{name}={engine}"),
        what: what.to_string(),
    };
    if BLOCK_ENGINES.contains(&engine) {
        return Ok(());
    }
    if engine.starts_with("external") || engine.contains('/') {
        return match policy.allow_exec {
            true => Ok(()),
            false => Err(runs(
                "load a shared object into its process (external engine)",
            )),
        };
    }
    if engine == "exec" {
        return match policy.allow_exec {
            true => Ok(()),
            false => Err(runs("run a program (the `exec` engine)")),
        };
    }
    if OTHER_ENGINES.contains(&engine) || choices("ioengine").contains(&engine) {
        return Err(Refusal::Bypasses {
            name: format!("{name}={engine}"),
            why: format!(
                "does no block I/O on the target (it works on files, the network or the CPU); \
                 block engines: {}",
                BLOCK_ENGINES.join(", ")
            ),
        });
    }
    match policy.allow_exec {
        true => Ok(()),
        false => Err(runs(&format!(
            "look for a shared object named after an engine it does not know; block engines: \
             {}",
            BLOCK_ENGINES.join(", ")
        ))),
    }
}

/// A file name without a directory: what a log prefix may be.
fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with(['.', '-'])
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
}

impl Shape {
    /// Whether `v` (trimmed) has this shape; `choices` are fio's listed values.
    pub(crate) fn accepts(self, v: &str, choices: &[&str]) -> bool {
        let only = |allowed: &dyn Fn(char) -> bool| !v.is_empty() && v.chars().all(allowed);
        match self {
            Shape::Bool => {
                v.is_empty()
                    || ["0", "1", "true", "false", "yes", "no", "on", "off"]
                        .contains(&v.to_ascii_lowercase().as_str())
            }
            Shape::Number => {
                !v.is_empty()
                    && v.split([',', ':'])
                        .all(|item| item.is_empty() || is_range(item))
            }
            Shape::Duration => crate::sys::parse::duration::duration(v).is_ok(),
            Shape::Floats => {
                !v.is_empty()
                    && v.split(':')
                        .all(|f| f.parse::<f64>().is_ok_and(f64::is_finite) && is_number(f))
            }
            Shape::SizeSplit => {
                !v.is_empty()
                    && v.split([',', ':', '/'])
                        .all(|item| item.is_empty() || is_number(item))
            }
            Shape::Choice { modifier } => {
                let (word, rest) = match v.split_once(':') {
                    Some((w, r)) if modifier => (w, Some(r)),
                    _ => (v, None),
                };
                choices.contains(&word)
                    && rest.is_none_or(|r| {
                        !r.is_empty()
                            && r.chars().all(|c| c.is_ascii_digit() || ".:/,%".contains(c))
                    })
            }
            Shape::CpuList => only(&|c| c.is_ascii_digit() || c == ',' || c == '-'),
            Shape::NumaPolicy => match v.split_once(':') {
                None => ["default", "local"].contains(&v),
                Some((mode, nodes)) => {
                    ["prefer", "bind", "interleave", "local"].contains(&mode)
                        && Shape::CpuList.accepts(nodes, &[])
                }
            },
            Shape::ErrorList => only(&|c| c.is_ascii_alphanumeric() || c == ',' || c == ':'),
            Shape::Pattern => is_pattern(v),
            Shape::Words => {
                only(&|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ",:_".contains(c))
            }
            Shape::Text => !v.chars().any(char::is_control),
        }
    }

    /// Why a fraction cannot stand in a value of this shape, with what to write instead; `None`
    /// for a value without one, or a shape that takes them (`Floats`). fio reads sizes,
    /// numbers and times with `strtoll`: it keeps the digits before a '.' and loses the rest,
    /// unit included, so `runtime=0.5s` is 0 (no time limit: the job ran over the whole
    /// device), `1.5ms` one second and `size=1.5m` one byte, all without a word.
    fn fraction_refused(self, v: &str) -> Option<String> {
        if !matches!(self, Shape::Number | Shape::SizeSplit | Shape::Duration) || !v.contains('.') {
            return None;
        }
        let instead = match self {
            Shape::Duration => crate::sys::parse::duration::duration(v)
                .ok()
                .map(whole_duration),
            _ => whole_size(v),
        };
        Some(format!(
            "a whole number: fio reads the digits before a '.' and drops the rest, unit \
             included ({v} would not be what it says){}",
            instead.map_or_else(
                || "; write a whole number (in a smaller unit, where it has one)".to_string(),
                |w| format!("; write {w}")
            )
        ))
    }

    /// What this shape allows, for error messages.
    pub(crate) fn describe(self, choices: &[&str]) -> String {
        match self {
            Shape::Bool => "a boolean: 0, 1, true, false, yes, no, on or off".into(),
            Shape::Number => "numbers with an optional unit or '%' (4k, 64k,1m, 1k-4k, 50%, \
                              0x1f, $ncpus); fio's units are k, m, g, t, p (with b, i or ib \
                              after) and us, ms, s, m, h, d, and it reads any other as none"
                .into(),
            Shape::Duration => "a time from 0s to 30d such as 10s, 500ms, 2m or 30".into(),
            Shape::Floats => "numbers separated by ':' (99:99.9)".into(),
            Shape::SizeSplit => "sizes and percentages joined by '/', ':' and ',' \
                                 (4k/10:64k/90)"
                .into(),
            Shape::Choice { modifier } => format!(
                "one of {}{}",
                choices.join(", "),
                if modifier {
                    ", optionally followed by ':' and numbers"
                } else {
                    " (nothing after it)"
                }
            ),
            Shape::CpuList => "a CPU or node list such as 0-3,8".into(),
            Shape::NumaPolicy => "default, local, or prefer/bind/interleave:NODES".into(),
            Shape::ErrorList => "error names or numbers separated by ',' or ':'".into(),
            Shape::Pattern => "hex (0xdeadbeef), decimal, \"text\" or %o; a pattern read from \
                               a file ('name') is refused"
                .into(),
            Shape::Words => "lower-case words, digits, ',' and ':'".into(),
            Shape::Text => "text without control characters".into(),
        }
    }
}

/// fio's keywords for the machine's figures, replaced in any option's value.
const FIO_KEYWORDS: &[&str] = &["$ncpus", "$mb_memory", "$pagesize"];

/// A value as fio reads it: without the ASCII blanks around it, and only those (what fio
/// strips), so a value is checked as fio will use it: `psync` followed by a no-break space
/// is no `psync` to fio (it looks for a shared object of that name).
pub(crate) fn fio_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_ascii_whitespace())
}

/// `4k`, `1.5`, `0x1f`, `-1`, `50%`, `10usec`, `$ncpus`: a number with at most a short unit.
fn is_number(s: &str) -> bool {
    if FIO_KEYWORDS.contains(&s) {
        return true;
    }
    let s = s.strip_prefix('-').unwrap_or(s);
    let s = s.strip_suffix('%').unwrap_or(s);
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    let digits = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(digits);
    number.parse::<f64>().is_ok_and(f64::is_finite)
        && FIO_UNITS.contains(&unit.to_ascii_lowercase().as_str())
}

/// The units fio gives a meaning, any case: sizes (`k` to `p`, with `b`, `i` or `ib` after)
/// and times (`us`, `ms`, `s`, `m`, `h`, `d`). fio reads any other unit as none at all:
/// `bs=4q` is 4 bytes and `thinktime=10sec` 10 microseconds, with no word said.
const FIO_UNITS: &[&str] = &[
    "", "b", "k", "kb", "ki", "kib", "m", "mb", "mi", "mib", "g", "gb", "gi", "gib", "t", "tb",
    "ti", "tib", "p", "pb", "pi", "pib", "us", "usec", "ms", "msec", "s", "h", "d",
];

/// A duration in the largest of s, ms and us that makes it a whole number (to the
/// microsecond).
fn whole_duration(d: std::time::Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// One number, with no unit or a one-letter one, as a whole number: `16.0` as `16`, `1.5m` as
/// `1536k` (fio's default of 1024 per step); `None` for anything else.
pub(crate) fn whole_size(v: &str) -> Option<String> {
    const UNITS: &str = "kmgtp";
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    if unit.len() > 1 {
        return None;
    }
    let mut value: f64 = number.parse().ok()?;
    if value.fract() == 0.0 {
        return Some(format!("{value}{unit}"));
    }
    let mut rank = UNITS
        .find(unit.to_ascii_lowercase().as_str())
        .filter(|_| unit.len() == 1)?;
    let upper = unit.chars().all(|c| c.is_ascii_uppercase());
    loop {
        value *= 1024.0;
        if value.fract() == 0.0 {
            let unit = if rank == 0 {
                ""
            } else {
                &UNITS[rank - 1..rank]
            };
            let unit = if upper {
                unit.to_ascii_uppercase()
            } else {
                unit.to_string()
            };
            return Some(format!("{value}{unit}"));
        }
        if rank == 0 {
            return None;
        }
        rank -= 1;
    }
}

/// A number or a range of two (`1k-4k`).
fn is_range(s: &str) -> bool {
    if is_number(s) {
        return true;
    }
    // A range's first bound is not negative, so the first '-' after it splits the two.
    match s.char_indices().skip(1).find(|&(_, c)| c == '-') {
        Some((i, _)) => is_number(&s[..i]) && is_number(&s[i + 1..]),
        None => false,
    }
}

/// fio's pattern syntax without its file form: hex, decimal, "text" and %o, concatenated.
fn is_pattern(s: &str) -> bool {
    let mut rest = fio_trim(s);
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('"') {
            let Some(end) = r.find('"') else {
                return false;
            };
            if r[..end].chars().any(char::is_control) {
                return false;
            }
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix("%o") {
            rest = r;
        } else if let Some(r) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
            let end = r.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(r.len());
            if end == 0 {
                return false;
            }
            rest = &r[end..];
        } else {
            let r = rest.strip_prefix('-').unwrap_or(rest);
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            if end == 0 {
                return false;
            }
            rest = &r[end..];
        }
        rest = rest.trim_start_matches([' ', ',', '|']);
    }
    true
}

/// Why a set of options writes to its target, or `None` for a read-only workload. Reads the
/// last value of each option as fio would; `rw` defaults to `read`. Conservative: a mixed
/// workload writes even at `rwmixread=100`.
pub(crate) fn writes<'a>(options: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<String> {
    let mut rw = "read";
    let mut engine = None;
    let mut zoned = false;
    let mut unknown = None;
    for (name, value) in options {
        match canonical(name) {
            "rw" => rw = value,
            "ioengine" => engine = Some(value),
            "zonemode" => zoned = fio_trim(value) == "zbd",
            _ if unknown.is_none() && !is_fio_option(name) => unknown = Some(name),
            _ => {}
        }
    }
    // `rw=randread:8` carries an offset modifier after the colon.
    let mode = fio_trim(rw.split(':').next().unwrap_or(""));
    if WRITING_RW.contains(&mode) {
        return Some(format!("rw={rw} writes to the target"));
    }
    // fio 3.33 resets the zones that are open beyond `max_open_zones` before any I/O, reads
    // included (zbd.c).
    if zoned {
        return Some("zonemode=zbd may reset the target's zones, even to read".to_string());
    }
    // Passed only through `allow_unknown_fio_options`: iolab cannot tell what it does.
    if let Some(name) = unknown {
        return Some(format!(
            "`{name}` is not an fio 3.33 option, so it may modify the target"
        ));
    }
    // An engine allowed only through `allow_exec` (a program, a shared object) may do anything.
    if let Some(e) = engine.map(fio_trim).filter(|e| !BLOCK_ENGINES.contains(e)) {
        return Some(format!(
            "ioengine={e} is not a block engine iolab knows, so it may modify the target"
        ));
    }
    None
}

/// The directions a job's I/O takes, `[read, write, trim]`, as fio's `rw` and a mix's shares
/// decide; `None` for an `rw` iolab does not know. A verifying job reads back what it wrote.
pub(crate) fn directions<'a>(
    options: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<[bool; 3]> {
    let (mut rw, mut mix_read, mut verify) = ("read", None, false);
    for (name, value) in options {
        let value = fio_trim(value);
        match canonical(name) {
            "rw" => rw = value,
            "rwmixread" => mix_read = value.parse::<u32>().ok(),
            "rwmixwrite" => mix_read = value.parse::<u32>().ok().map(|w| 100u32.saturating_sub(w)),
            "verify" => verify = !matches!(value, "0" | "none"),
            _ => {}
        }
    }
    let [read, write, trim] = match fio_trim(rw.split(':').next().unwrap_or("")) {
        "read" | "randread" => [true, false, false],
        "write" | "randwrite" => [false, true, false],
        "rw" | "readwrite" | "randrw" => [mix_read != Some(0), mix_read != Some(100), false],
        "trim" | "randtrim" => [false, false, true],
        "trimwrite" | "randtrimwrite" => [false, true, true],
        _ => return None,
    };
    Some([read || (verify && write), write, trim])
}

/// Whether these options make fio run a program or load code (allowed by `allow_exec`).
pub(crate) fn runs_programs<'a>(options: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
    options.into_iter().any(|(name, value)| match rule(name) {
        Some(Rule::Exec(_)) => true,
        Some(Rule::Engine) => !BLOCK_ENGINES.contains(&fio_trim(value)),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_follow_rw_its_mix_and_verify() {
        let d = |opts: &[(&str, &str)]| directions(opts.iter().copied());
        assert_eq!(d(&[]), Some([true, false, false]));
        assert_eq!(d(&[("rw", "randwrite")]), Some([false, true, false]));
        assert_eq!(d(&[("readwrite", "randrw")]), Some([true, true, false]));
        assert_eq!(
            d(&[("rw", "randrw"), ("rwmixread", "100")]),
            Some([true, false, false])
        );
        assert_eq!(
            d(&[("rw", "rw"), ("rwmixwrite", "100")]),
            Some([false, true, false])
        );
        assert_eq!(d(&[("rw", "randread:8")]), Some([true, false, false]));
        assert_eq!(d(&[("rw", "trimwrite")]), Some([false, true, true]));
        assert_eq!(
            d(&[("rw", "write"), ("verify", "crc32c")]),
            Some([true, true, false])
        );
        assert_eq!(
            d(&[("rw", "write"), ("verify", "0")]),
            Some([false, true, false])
        );
        assert_eq!(d(&[("rw", "sideways")]), None);
    }

    #[test]
    fn programs_are_run_by_exec_options_and_engines_that_are_not_block_engines() {
        assert!(!runs_programs([("rw", "read"), ("ioengine", "io_uring")]));
        assert!(runs_programs([("exec_prerun", "sync")]));
        assert!(runs_programs([("ioengine", "exec")]));
        assert!(runs_programs([("ioengine", "external:/x.so")]));
        assert!(runs_programs([
            ("ioengine", " libaio"),
            ("ioengine", "exec")
        ]));
    }

    const DEFAULT: OptionPolicy = OptionPolicy {
        allow_exec: false,
        allow_destructive: false,
        allow_unknown: false,
    };

    /// Values that name a file, in every form fio might read one.
    const PATHS: &[&str] = &[
        "/tmp/iolab-probe",
        "../iolab-probe",
        "mmap:/tmp/iolab-probe",
        "mmaphuge:/tmp/iolab-probe",
        "external:/tmp/iolab-probe.so",
        "'/tmp/iolab-probe'",
        "randread:/tmp/iolab-probe",
        "${HOME}/iolab-probe",
    ];

    #[test]
    fn catalogue_has_options_and_aliases() {
        assert!(is_fio_option("iodepth"));
        assert!(is_fio_option("hipri"));
        assert!(is_fio_option("readwrite"));
        assert!(is_fio_option("iomem"));
        assert_eq!(canonical("readwrite"), "rw");
        assert_eq!(canonical("blocksize"), "bs");
        assert_eq!(canonical("iomem"), "mem");
        assert!(!is_fio_option("iodeph"));
        assert_eq!(suggest("iodeph"), Some("iodepth"));
        assert_eq!(suggest("zzzzzzzzzzzz"), None);
        assert!(fio_option_names().count() > 230);
    }

    /// The allow-list is total: every option fio has gets a rule, so none falls through to
    /// "no rule" by accident (that would be refused, but silently for the wrong reason).
    #[test]
    fn every_fio_option_has_a_rule() {
        let missing: Vec<&str> = fio_option_names().filter(|n| rule(n).is_none()).collect();
        assert!(missing.is_empty(), "options without a rule: {missing:?}");
    }

    /// Whatever the option, a value that names a file is refused; only a job description,
    /// which fio prints and never opens, takes free text.
    #[test]
    fn no_option_takes_a_path() {
        for name in fio_option_names() {
            if rule(name) == Some(Rule::Value(Shape::Text)) {
                assert_eq!(name, "description");
                continue;
            }
            for value in PATHS {
                assert!(
                    check_option(name, value, &DEFAULT).is_err(),
                    "{name}={value} was allowed"
                );
            }
        }
    }

    #[test]
    fn fios_own_choices_are_accepted() {
        for name in fio_option_names() {
            if let Some(Rule::Value(Shape::Choice { .. })) = rule(name) {
                for v in choices(name) {
                    check_option(name, v, &DEFAULT).unwrap_or_else(|e| panic!("{name}={v}: {e}"));
                }
            }
        }
    }

    #[test]
    fn plain_options_pass() {
        for (n, v) in [
            ("rw", "randread"),
            ("rw", "randread:8"),
            ("readwrite", "randrw"),
            ("bs", "4k"),
            ("bs", "4k,64k"),
            ("bs", ",8k"),
            ("bsrange", "1k-4k,4k-8k"),
            ("bssplit", "4k/10:64k/50:1m/40"),
            ("iodepth", "32"),
            ("numjobs", "$ncpus"),
            ("ioengine", "io_uring"),
            ("direct", "1"),
            ("time_based", ""),
            ("time_based", "true"),
            ("runtime", "10s"),
            ("ramp_time", "500ms"),
            ("size", "50%"),
            ("size", "1G"),
            ("size", "1GiB"),
            ("bs", "4KB"),
            ("thinktime", "2ms"),
            ("offset", "10%"),
            ("thinktime", "10usec"),
            ("nice", "-10"),
            ("cpumask", "0xf"),
            ("percentile_list", "50:99:99.9"),
            ("random_distribution", "zipf:1.2"),
            ("random_distribution", "zoned:60/10:30/20:10/70"),
            ("mem", "mmaphuge"),
            ("iomem", "malloc"),
            ("cpus_allowed", "0-3,8"),
            ("numa_mem_policy", "bind:0-1"),
            ("ignore_error", "EIO,ENOSPC:5"),
            ("verify_pattern", "0xdeadbeef"),
            ("buffer_pattern", "\"abcd\"-12%o"),
            ("description", "4k/64k mix, as in case 1"),
            ("write_lat_log", "lat"),
            ("write_bw_log", "iolab.bw"),
        ] {
            check_option(n, v, &DEFAULT).unwrap_or_else(|e| panic!("{n}={v}: {e}"));
        }
    }

    /// The two holes found by hand: buffers in a file, logs anywhere.
    #[test]
    fn files_named_by_values_are_refused() {
        for (n, v) in [
            ("mem", "mmap:/tmp/x"),
            ("iomem", "mmapshared:/root/file"),
            ("write_bw_log", "/etc/iolab"),
            ("write_lat_log", "../lat"),
            ("write_iops_log", "a/b"),
            ("write_hist_log", ".hidden"),
            ("buffer_pattern", "'/etc/shadow'"),
            ("verify_pattern", "'x'"),
        ] {
            let e = check_option(n, v, &DEFAULT).unwrap_err();
            assert!(matches!(e, Refusal::BadValue { .. }), "{n}={v}: {e:?}");
        }
        let e = check_option("mem", "mmap:/tmp/x", &DEFAULT).unwrap_err();
        assert!(e.to_string().contains("one of malloc"), "{e}");
    }

    #[test]
    fn values_of_the_wrong_shape_are_refused() {
        for (n, v) in [
            ("bs", "big"),
            // fio reads these as 4 bytes and 10 microseconds: typos, not units.
            ("bs", "4q"),
            ("bs", "4kk"),
            ("thinktime", "10sec"),
            ("iodepth", "(1+2)"),
            ("runtime", "-4s"),
            ("runtime", "inf"),
            ("runtime", "nan"),
            ("direct", "maybe"),
            ("rw", "sideways"),
            ("rw", "read:x"),
            ("cpus_allowed", "all"),
            ("percentile_list", "99:inf"),
            ("description", "a\u{1b}[2Jb"),
            // Negative sizes and counts: fio accepts bs=-4k, then does no I/O.
            ("bs", "-4k"),
            ("blocksize", "4k,-8k"),
            ("size", "-1g"),
            ("offset", "-10%"),
            ("bsrange", "-1k-4k"),
            ("iodepth", "-1"),
            ("rate_iops", "-100"),
        ] {
            let e = check_option(n, v, &DEFAULT).unwrap_err();
            assert!(matches!(e, Refusal::BadValue { .. }), "{n}={v}: {e:?}");
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
            ("std_redirect", "1"),
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
    fn engines_that_do_no_block_io_are_refused() {
        for e in ["filedelete", "ftruncate", "net", "cpuio", "rdma"] {
            let r = check_option("ioengine", e, &DEFAULT).unwrap_err();
            assert!(matches!(r, Refusal::Bypasses { .. }), "{e}: {r:?}");
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
            "cgroup",
            "profile",
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
        let destructive = OptionPolicy {
            allow_destructive: true,
            ..DEFAULT
        };
        check_option("allow_mounted_write", "1", &destructive).unwrap();
        // Jobs that wait for others ran after them: their rates summed were no moment's.
        for n in ["stonewall", "wait_for_previous", "wait_for"] {
            let e = check_option(n, "", &DEFAULT).unwrap_err().to_string();
            assert!(e.contains("sums their rates"), "{n}: {e}");
        }
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
    fn write_detection() {
        assert_eq!(writes([]), None);
        assert_eq!(writes([("rw", "randread")]), None);
        assert_eq!(writes([("rw", "randread:8")]), None);
        assert!(writes([("rw", "randwrite")]).is_some());
        assert!(writes([("readwrite", "randrw"), ("rwmixread", "100")]).is_some());
        assert!(writes([("rw", "trim")]).is_some());
        assert!(writes([("rw", "write"), ("rw", "read")]).is_none());
        assert!(writes([("ioengine", "external:/x.so")]).is_some());
        assert!(writes([("ioengine", "io_uring")]).is_none());
    }

    #[test]
    fn an_include_is_refused_even_where_unknown_options_are_allowed() {
        let newer = OptionPolicy {
            allow_unknown: true,
            allow_exec: true,
            allow_destructive: true,
        };
        for name in ["include", "includes", "include_file"] {
            for policy in [&DEFAULT, &newer] {
                let e = check_option(name, "/var/tmp/evil.fio", policy).unwrap_err();
                assert!(matches!(e, Refusal::Bypasses { .. }), "{name}: {e:?}");
            }
        }
    }

    #[test]
    fn fio_keywords_with_arithmetic_are_refused_as_running_bc() {
        for (name, value) in [
            ("numjobs", "$ncpus-1"),
            ("bssplit", "$pagesize/50"),
            ("size", "$mb_memory*2"),
            ("iodepth", "2+$ncpus"),
            ("description", "while($ncpus+1) x=1"),
            ("buffer_pattern", "\"$ncpus-1\""),
        ] {
            let e = check_option(name, value, &DEFAULT).unwrap_err();
            assert!(
                matches!(e, Refusal::RunsCode { .. }),
                "{name}={value}: {e:?}"
            );
            assert!(e.to_string().contains("`bc`"), "{e}");
        }
        // A keyword alone is replaced and nothing runs; with allow_exec bc may run.
        check_option("numjobs", "$ncpus", &DEFAULT).unwrap();
        check_option("size", "1k-4k", &DEFAULT).unwrap();
        let exec = OptionPolicy {
            allow_exec: true,
            ..DEFAULT
        };
        check_option("numjobs", "$ncpus-1", &exec).unwrap();
    }

    #[test]
    fn an_environment_variable_fio_would_expand_is_refused() {
        let all = OptionPolicy {
            allow_exec: true,
            allow_destructive: true,
            allow_unknown: true,
        };
        for (name, value) in [
            ("description", "run by ${USER} from ${HOME}"),
            ("buffer_pattern", "\"${HOME}\""),
            ("iodepth", "${DEPTH}"),
            ("not_a_fio_option", "${HOME}"),
        ] {
            for policy in [&DEFAULT, &all] {
                let e = check_option(name, value, policy).unwrap_err();
                assert!(e.to_string().contains("environment variable"), "{e}");
            }
        }
        // A lone `$` is no variable, and fio's own keywords stay fio's.
        check_option("description", "costs $5, uses $ncpus jobs", &DEFAULT).unwrap();
    }

    /// fio reads a job file in 8 KiB pieces: past that, a long `description` was read as
    /// further options (`ioengine=external:...` loaded code as root, `include` printed a file).
    #[test]
    fn a_line_longer_than_fio_reads_whole_is_refused() {
        let pad = "A".repeat(FIO_LINE_MAX - "description=".len());
        let smuggled = format!("{pad}ioengine=external:/tmp/x.so");
        let e = check_option("description", &smuggled, &DEFAULT).unwrap_err();
        assert!(e.to_string().contains("must be at most 4096 bytes"), "{e}");
        let longest = "d".repeat(OPTION_LINE_MAX - "description=".len());
        check_option("description", &longest, &DEFAULT).unwrap();
        check_option("description", &format!("{longest}d"), &DEFAULT).unwrap_err();
        // Whatever the policy allows.
        let all = OptionPolicy {
            allow_exec: true,
            allow_unknown: true,
            allow_destructive: true,
        };
        check_option("description", &smuggled, &all).unwrap_err();
    }

    #[test]
    fn no_jobs_is_refused_with_its_reason() {
        for zero in ["0", " 0 ", "0.0", "-4"] {
            let e = check_option("numjobs", zero, &DEFAULT).unwrap_err();
            assert!(e.to_string().contains("at least 1 job"), "{e}");
        }
        check_option("numjobs", "1", &DEFAULT).unwrap();
    }

    /// fio keeps the digits before a '.' and drops the rest, unit included: a fraction is
    /// refused, saying what to write.
    #[test]
    fn a_fraction_fio_would_cut_off_is_refused_saying_what_to_write() {
        for (n, v, instead) in [
            ("runtime", "0.5s", "write 500ms"),
            ("ramp_time", "1.5", "write 1500ms"),
            ("runtime", "1.5ms", "write 1500us"),
            ("runtime", "2.0s", "write 2s"),
            ("iodepth", "16.0", "write 16"),
            ("rwmixread", "33.3", "write a whole number"),
            ("size", "1.5m", "write 1536k"),
            ("bs", "1.5K", "write 1536"),
            ("size", "0.3k", "write a whole number (in a smaller unit"),
            ("bs", "4k,1.5k", "write a whole number (in a smaller unit"),
            (
                "bssplit",
                "4k/50:1.5m/50",
                "write a whole number (in a smaller unit",
            ),
        ] {
            let e = check_option(n, v, &DEFAULT).unwrap_err().to_string();
            assert!(
                e.contains("a whole number") && e.contains(instead),
                "{n}={v}: {e}"
            );
        }
        check_option("percentile_list", "99.5:99.9", &DEFAULT).unwrap();
        check_option("runtime", "500ms", &DEFAULT).unwrap();
    }

    #[test]
    fn values_are_checked_as_fio_trims_them() {
        check_option("ioengine", " psync\t", &DEFAULT).unwrap();
        // fio keeps a no-break space, then looks for a shared object named `psync\u{a0}`.
        let e = check_option("ioengine", "psync\u{a0}", &DEFAULT).unwrap_err();
        assert!(matches!(e, Refusal::RunsCode { .. }), "{e:?}");
        assert!(check_option("rw", "\u{2003}randread", &DEFAULT).is_err());
    }

    #[test]
    fn zoned_and_unknown_options_count_as_writing() {
        assert!(writes([("zonemode", "zbd"), ("rw", "read")])
            .unwrap()
            .contains("zones"));
        assert!(writes([("zonemode", "none")]).is_none());
        assert!(writes([("rw", "read"), ("newer_option", "1")])
            .unwrap()
            .contains("`newer_option`"));
    }
}

//! Reading and writing one sysfs/procfs attribute, with the kernel's terse errno turned into
//! a message that names the file, the value and what to do. Pure helpers (`current_choice`,
//! `explain_write_error`) are separate from the two calls that touch the file.

use std::io;
use std::time::{Duration, Instant};

/// Whether an attribute that reads `now` after `written` was written keeps that value: the
/// same choice of a list (`[mq-deadline] none`), number (`08` and `8`), words (a sysctl's
/// tabs), or switch (`Y` and `1`). An interrupt's mask reads back in another form (the
/// placement journal keeps what iolab wrote), and a `wbt_lat_usec` of -1 asks for the default,
/// which reads as itself.
pub(super) fn keeps(path: &str, written: &str, now: &str) -> bool {
    if path.starts_with("/proc/irq/") || (path.ends_with("/wbt_lat_usec") && written.trim() == "-1")
    {
        return true;
    }
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let (w, n) = (words(&current_choice(written)), words(&current_choice(now)));
    let switch = |t: &str| match t {
        "Y" | "y" => Some(1),
        "N" | "n" => Some(0),
        _ => t.parse::<i64>().ok(),
    };
    w == n
        || matches!((switch(&w), switch(&n)), (Some(a), Some(b)) if a == b)
        || matches!((w.parse::<f64>(), n.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
}

/// The value an attribute holds now, as it must be written back to restore it. Multiple-choice
/// attributes (`queue/scheduler`, THP's `enabled`, tracefs' `trace_clock`) print every choice
/// with the active one in brackets: "[mq-deadline] none" -> "mq-deadline". tracefs'
/// `buffer_size_kb` before its first use reads "7 (expanded: 1408)": the size it takes
/// when used, 1408, is what to write back. Everything else is the trimmed text.
pub fn current_choice(text: &str) -> String {
    let t = text.trim();
    if let Some(size) = t
        .split_once("(expanded:")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
    {
        return size.trim().to_string();
    }
    if let (Some(open), Some(close)) = (t.find('['), t.find(']')) {
        if open < close {
            return t[open + 1..close].trim().to_string();
        }
    }
    t.to_string()
}

/// Writes an attribute's current value back: no change, but the kernel still checks whether
/// the attribute may be written at all. Finds kernel-managed IRQs (EPERM/EIO) and read-only
/// attributes before an experiment depends on them. Not for `scheduler` on old kernels, where
/// rewriting the same elevator re-initialises it.
pub fn probe_rewrite(path: &str) -> Result<(), super::KnobError> {
    let current = read_attr(path)?;
    write_attr(path, &current)
}

/// Reads an attribute's restorable value.
pub fn read_attr(path: &str) -> Result<String, super::KnobError> {
    std::fs::read_to_string(path)
        .map(|t| current_choice(&t))
        .map_err(|source| super::KnobError::Read {
            path: path.to_string(),
            source,
        })
}

/// Writes `value` to the attribute in a single write(2), as sysfs expects. O_TRUNC is what a
/// shell's `echo v > attr` does: sysfs ignores it, and on plain files (tests) it makes the
/// file hold exactly the value.
pub(crate) fn write_attr(path: &str, value: &str) -> Result<(), super::KnobError> {
    use std::io::Write;
    let result = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()));
    result.map_err(|e| {
        let choices = std::fs::read_to_string(path).ok();
        super::KnobError::Write {
            path: path.to_string(),
            value: value.to_string(),
            why: explain_write_error(path, &e, choices.as_deref()),
            source: e,
        }
    })
}

/// How long putting a value back waits for the kernel to stop answering EBUSY.
pub(crate) const BUSY_PATIENCE: Duration = Duration::from_secs(3);

/// Runs `write` again while it fails with EBUSY, until `patience` runs out.
///
/// Restores use it. The kernel refuses to change the tracer while anything holds
/// a per-CPU `trace_pipe_raw` open, and the recorder closing its own descriptors is not enough: a child
/// that another thread of the process forks keeps a copy of every descriptor until its exec
/// closes them (an experiment's sampler spawns programs while a run's trace stops). That
/// copy is gone within milliseconds; a reader that stays open still ends in the error.
pub(crate) fn retry_while_busy(
    mut write: impl FnMut() -> Result<(), super::KnobError>,
    patience: Duration,
) -> Result<(), super::KnobError> {
    let deadline = Instant::now() + patience;
    loop {
        match write() {
            Err(super::KnobError::Write { source, .. })
                if source.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

/// Why a write failed, in terms a user can act on.
pub(crate) fn explain_write_error(path: &str, e: &io::Error, current_text: Option<&str>) -> String {
    let is_irq = path.starts_with("/proc/irq/");
    match e.raw_os_error() {
        Some(libc::EINVAL) => match current_text.map(str::trim) {
            Some(t) if t.contains('[') => format!("the kernel rejected it; choices: {t}"),
            _ if is_irq => {
                "the kernel rejected it (CPU list empty, offline or out of range?)".into()
            }
            _ if path.starts_with("/sys/block/") => {
                "the kernel rejected it (out of range or not supported by this device)".into()
            }
            _ => "the kernel rejected it (out of range, or not a value it takes)".into(),
        },
        Some(libc::EPERM) | Some(libc::EIO) if is_irq => {
            "this interrupt's affinity is managed by the kernel and cannot be moved".into()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "permission denied (iolab must run as root to change knobs)".into()
        }
        Some(libc::ENOENT) => "no such attribute on this kernel or device".into(),
        Some(libc::EBUSY) if path.contains("/tracing/") => {
            "tracefs is busy: something holds trace_pipe, a trace_pipe_raw or trace open".into()
        }
        Some(libc::EBUSY) => "the device is busy; try again when it is idle".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_kept_when_it_reads_back_as_the_same_choice_number_words_or_switch() {
        let q = "/sys/block/sda/queue";
        assert!(keeps(
            &format!("{q}/scheduler"),
            "mq-deadline",
            "none [mq-deadline] kyber"
        ));
        assert!(!keeps(
            &format!("{q}/scheduler"),
            "kyber",
            "none [mq-deadline] kyber"
        ));
        assert!(keeps(&format!("{q}/nr_requests"), "064", "64\n"));
        assert!(!keeps(&format!("{q}/read_ahead_kb"), "5", "4"));
        assert!(!keeps(&format!("{q}/iosched/fifo_batch"), "-8", "0"));
        assert!(keeps(
            &format!("{q}/write_cache"),
            "write back",
            "write back\n"
        ));
        assert!(keeps(
            "/proc/sys/net/ipv4/tcp_rmem",
            "4096 131072 6291456",
            "4096\t131072\t6291456"
        ));
        assert!(keeps("/sys/module/m/parameters/p", "1", "Y"));
        // The default asked for reads as itself; an interrupt's mask in another form.
        assert!(keeps(&format!("{q}/wbt_lat_usec"), "-1", "2000"));
        assert!(!keeps(&format!("{q}/wbt_lat_usec"), "-2", "2000"));
        assert!(keeps("/proc/irq/45/smp_affinity_list", "1", "0x2"));
    }

    #[test]
    fn bracketed_choice_is_the_current_value() {
        assert_eq!(current_choice("[mq-deadline] none\n"), "mq-deadline");
        assert_eq!(current_choice("mq-deadline kyber [none] bfq\n"), "none");
        assert_eq!(current_choice("always [madvise] never\n"), "madvise");
        assert_eq!(current_choice("128\n"), "128");
        assert_eq!(current_choice("0-1\n"), "0-1");
        assert_eq!(current_choice("] odd [\n"), "] odd [");
        assert_eq!(current_choice("7 (expanded: 1408)\n"), "1408");
        assert_eq!(current_choice("local global [mono] boot\n"), "mono");
    }

    #[test]
    fn a_busy_write_is_tried_again_until_it_passes_or_patience_runs_out() {
        let fail = |errno: i32| super::super::KnobError::Write {
            path: "/sys/kernel/tracing/current_tracer".into(),
            value: "nop".into(),
            why: String::new(),
            source: io::Error::from_raw_os_error(errno),
        };
        let mut tries = 0;
        let passed = retry_while_busy(
            || {
                tries += 1;
                if tries < 4 {
                    Err(fail(libc::EBUSY))
                } else {
                    Ok(())
                }
            },
            Duration::from_secs(5),
        );
        assert!(passed.is_ok());
        assert_eq!(tries, 4);

        let started = Instant::now();
        assert!(retry_while_busy(|| Err(fail(libc::EBUSY)), Duration::from_millis(50)).is_err());
        assert!(started.elapsed() >= Duration::from_millis(50));

        // Any other error is final at once.
        let mut tries = 0;
        let refused = retry_while_busy(
            || {
                tries += 1;
                Err(fail(libc::EINVAL))
            },
            Duration::from_secs(5),
        );
        assert!(refused.is_err());
        assert_eq!(tries, 1);
    }

    #[test]
    fn probe_rewrite_leaves_the_value_and_reports_failures() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("attr");
        std::fs::write(&p, "always [madvise] never\n").unwrap();
        probe_rewrite(p.to_str().unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "madvise");
        let missing = dir.path().join("missing");
        let err = probe_rewrite(missing.to_str().unwrap()).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn errors_are_explained_per_errno_and_file_kind() {
        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        let why = explain_write_error(
            "/sys/block/loop0/queue/scheduler",
            &einval,
            Some("[none] mq-deadline\n"),
        );
        assert!(why.contains("choices: [none] mq-deadline"), "{why}");
        let eperm = io::Error::from_raw_os_error(libc::EPERM);
        let why = explain_write_error("/proc/irq/25/smp_affinity_list", &eperm, None);
        assert!(why.contains("managed by the kernel"), "{why}");
        let why = explain_write_error("/sys/block/loop0/queue/nr_requests", &eperm, None);
        assert!(why.contains("root"), "{why}");
    }
}

//! The block-queue knobs an experiment can vary, and the values each accepts — in one place,
//! so the experiment validator, the knob writer and the documentation agree. Whether a device
//! actually offers a knob or a scheduler is a question for the machine model at plan time;
//! this list only rejects values no kernel accepts, before anything runs.

/// The values a knob accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Domain {
    /// One of these exact words.
    OneOf(&'static [&'static str]),
    /// An integer in this inclusive range.
    Range(i64, i64),
}

impl Domain {
    /// Human-readable description, used in error messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Domain::OneOf(words) => words
                .iter()
                .map(|w| format!("\"{w}\""))
                .collect::<Vec<_>>()
                .join(", "),
            Domain::Range(lo, hi) if *hi == i64::MAX => format!("an integer >= {lo}"),
            Domain::Range(lo, hi) => format!("an integer from {lo} to {hi}"),
        }
    }
}

/// One knob under /sys/block/DEV/queue/.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueKnob {
    /// The factor name in experiment files.
    pub name: &'static str,
    /// Path relative to /sys/block/DEV/queue/.
    pub attribute: &'static str,
    pub domain: Domain,
    pub about: &'static str,
}

/// I/O schedulers the kernel ships (the device's `queue/scheduler` lists those loaded).
pub(crate) const SCHEDULERS: &[&str] = &["none", "mq-deadline", "kyber", "bfq"];

pub(crate) const QUEUE_KNOBS: &[QueueKnob] = &[
    QueueKnob {
        name: "scheduler",
        attribute: "scheduler",
        domain: Domain::OneOf(SCHEDULERS),
        about: "the I/O scheduler",
    },
    QueueKnob {
        name: "rq_affinity",
        attribute: "rq_affinity",
        domain: Domain::OneOf(&["0", "1", "2"]),
        about: "complete requests on the submitting CPU's group (1) or the CPU itself (2)",
    },
    QueueKnob {
        name: "nr_requests",
        attribute: "nr_requests",
        domain: Domain::Range(4, 1 << 20),
        about: "requests the queue may hold (the kernel's minimum is 4)",
    },
    QueueKnob {
        name: "read_ahead_kb",
        attribute: "read_ahead_kb",
        domain: Domain::Range(0, 1 << 30),
        about: "read-ahead window in KiB",
    },
    QueueKnob {
        name: "nomerges",
        attribute: "nomerges",
        domain: Domain::OneOf(&["0", "1", "2"]),
        about: "merging: all (0), only simple one-hit (1), none (2)",
    },
    QueueKnob {
        name: "wbt_lat_usec",
        attribute: "wbt_lat_usec",
        domain: Domain::Range(-1, i64::MAX),
        about: "writeback throttling target latency; 0 disables, -1 restores the default",
    },
    QueueKnob {
        name: "io_poll",
        attribute: "io_poll",
        domain: Domain::OneOf(&["0", "1"]),
        about: "polled completions on the queue",
    },
    QueueKnob {
        name: "io_poll_delay",
        attribute: "io_poll_delay",
        domain: Domain::Range(-1, i64::MAX),
        about: "polling delay: -1 classic polling, 0 hybrid, >0 fixed microseconds",
    },
    QueueKnob {
        name: "add_random",
        attribute: "add_random",
        domain: Domain::OneOf(&["0", "1"]),
        about: "feed I/O timings to the entropy pool",
    },
    QueueKnob {
        name: "iostats",
        attribute: "iostats",
        domain: Domain::OneOf(&["0", "1"]),
        about: "account I/O statistics",
    },
    QueueKnob {
        name: "rotational",
        attribute: "rotational",
        domain: Domain::OneOf(&["0", "1"]),
        about: "treat the device as rotational",
    },
    QueueKnob {
        name: "max_sectors_kb",
        attribute: "max_sectors_kb",
        domain: Domain::Range(4, 1 << 30),
        about: "largest request in KiB (up to the device's max_hw_sectors_kb)",
    },
    QueueKnob {
        name: "write_cache",
        attribute: "write_cache",
        domain: Domain::OneOf(&["write back", "write through"]),
        about: "how the kernel treats the device's volatile cache",
    },
    QueueKnob {
        name: "io_timeout",
        attribute: "io_timeout",
        domain: Domain::Range(1, i64::MAX),
        about: "request timeout in milliseconds",
    },
];

/// The settings each in-tree I/O scheduler offers under `queue/iosched/` (block/mq-deadline.c,
/// kyber-iosched.c and bfq-iosched.c; as Linux 6.x names them, older kernels a subset: a name
/// an older one lacks fails when written). Every one takes an integer. The device's current
/// scheduler is known better by what its directory holds; a scheduler not listed here (out
/// of tree) is checked only when written.
const SCHEDULER_SETTINGS: &[(&str, &[&str])] = &[
    ("none", &[]),
    (
        "mq-deadline",
        &[
            "async_depth",
            "fifo_batch",
            "front_merges",
            "prio_aging_expire",
            "read_expire",
            "write_expire",
            "writes_starved",
        ],
    ),
    ("kyber", &["read_lat_nsec", "write_lat_nsec"]),
    (
        "bfq",
        &[
            "back_seek_max",
            "back_seek_penalty",
            "fifo_expire_async",
            "fifo_expire_sync",
            "low_latency",
            "max_budget",
            "slice_idle",
            "slice_idle_us",
            "strict_guarantees",
            "timeout_sync",
        ],
    ),
];

/// The settings of in-tree scheduler `scheduler` under `queue/iosched/`; `None` for one not
/// in the kernel's tree.
pub(crate) fn scheduler_settings(scheduler: &str) -> Option<&'static [&'static str]> {
    SCHEDULER_SETTINGS
        .iter()
        .find(|(s, _)| *s == scheduler)
        .map(|(_, settings)| *settings)
}

/// The kernel's request timeout for SCSI disks and NVMe namespaces, in milliseconds.
const KERNEL_IO_TIMEOUT_MS: i64 = 30_000;

/// Why writing `value` to `attribute` puts the data on the device at risk, if it does: such a
/// level is judged like a workload that writes (refused on a device that holds data unless
/// it is named as destructive). An allow-list: the scheduler's own settings (`iosched/...`)
/// and the knobs above are known; any other attribute (a later kernel's) is not.
pub(crate) fn endangers_data(attribute: &str, value: &str) -> Option<String> {
    let why = match attribute {
        "write_cache" if value == "write through" => {
            "write_cache = \"write through\" stops the kernel's cache flushes to the device: a \
             power loss would lose what its file systems believe written"
        }
        "io_timeout"
            if value
                .parse::<i64>()
                .is_ok_and(|ms| ms < KERNEL_IO_TIMEOUT_MS) =>
        {
            "an io_timeout below the kernel's 30 s fails requests the device is slow to finish, \
             its file systems' among them"
        }
        "stable_writes" if value == "0" => {
            "stable_writes = 0 lets pages change while they are written, so parity or checksums \
             kept on the device may no longer match its data"
        }
        "stable_writes" => return None,
        _ if attribute.starts_with("iosched/") || find(attribute).is_some() => return None,
        _ => {
            return Some(format!(
                "queue/{attribute} is not one of the queue settings iolab knows to leave the \
                 data alone"
            ))
        }
    };
    Some(why.to_string())
}

/// The knob with this factor name.
pub(crate) fn find(name: &str) -> Option<&'static QueueKnob> {
    QUEUE_KNOBS.iter().find(|k| k.name == name)
}

/// The names of all known knobs, for "allowed" lists.
pub(crate) fn names() -> Vec<&'static str> {
    QUEUE_KNOBS.iter().map(|k| k.name).collect()
}

impl QueueKnob {
    /// Checks a value (already in text form) and returns the text to write to sysfs, or a
    /// message saying what is allowed.
    pub(crate) fn check(&self, value: &str) -> Result<String, String> {
        let v = value.trim();
        match self.domain {
            Domain::OneOf(words) if words.contains(&v) => Ok(v.to_string()),
            Domain::Range(lo, hi) => match v.parse::<i64>() {
                Ok(n) if (lo..=hi).contains(&n) => Ok(n.to_string()),
                _ => Err(self.allowed()),
            },
            Domain::OneOf(_) => Err(self.allowed()),
        }
    }

    pub(crate) fn allowed(&self) -> String {
        format!(
            "`{}` ({}) takes {}",
            self.name,
            self.about,
            self.domain.describe()
        )
    }
}

/// A queue attribute named by path (`queue/iosched/fifo_batch`): a safe relative path of
/// lower-case words, no `..`.
pub(crate) fn is_valid_attribute_path(path: &str) -> bool {
    !path.is_empty()
        && path.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_accept_and_refuse() {
        let rq = find("rq_affinity").unwrap();
        assert_eq!(rq.check("2"), Ok("2".to_string()));
        let e = rq.check("3").unwrap_err();
        assert!(e.contains("\"0\", \"1\", \"2\""), "{e}");
        let nr = find("nr_requests").unwrap();
        assert_eq!(nr.check(" 64 "), Ok("64".to_string()));
        assert!(nr.check("2").is_err());
        assert!(nr.check("x").unwrap_err().contains("from 4 to"));
        assert!(find("wbt_lat_usec").unwrap().check("-1").is_ok());
        assert!(find("scheduler").unwrap().check("cfq").is_err());
        assert!(find("write_cache").unwrap().check("write through").is_ok());
        assert!(endangers_data("write_cache", "write through").is_some());
        assert!(endangers_data("write_cache", "write back").is_none());
        assert!(endangers_data("io_timeout", "1000").is_some());
        assert!(endangers_data("io_timeout", "60000").is_none());
        assert!(endangers_data("read_ahead_kb", "0").is_none());
        assert!(endangers_data("iosched/fifo_batch", "1").is_none());
        assert!(endangers_data("stable_writes", "0").is_some());
        assert!(endangers_data("stable_writes", "1").is_none());
        assert!(endangers_data("some_new_attribute", "1").is_some());
        assert!(find("nope").is_none());
        assert!(names().contains(&"io_poll"));
    }

    #[test]
    fn attribute_paths() {
        assert!(is_valid_attribute_path("iosched/fifo_batch"));
        assert!(!is_valid_attribute_path("../../../etc"));
        assert!(!is_valid_attribute_path("a//b"));
        assert!(!is_valid_attribute_path("A"));
    }
}

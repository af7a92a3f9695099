//! The environment a run started in, recorded with every run: a run's figures depend on how
//! much memory was free and how much the page cache held when it began (buffered I/O, the
//! kernel's own allocations), on the fio and iolab that produced them, and on the kernel's
//! command line (C-state limits, `nohz_full`, IOMMU and polling settings live there). These
//! change between runs of one experiment, so they are read at each run's start rather than
//! once per experiment as preflight is. So are the queue settings of the devices the run
//! drove, factors or not: a kernel whose default scheduler changed measures another
//! scheduler (seeds/001), and a loop device keeps whatever its last user left it with.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::preflight::parse::meminfo_kib;
use crate::sys::SysRoot;
use crate::workload::FioReport;

/// iolab's version with the commit it was built from (build.rs).
pub(crate) const IOLAB_VERSION: &str = env!("IOLAB_VERSION");

/// The run's `environment` column. What could not be read is left out. Readers (`show`'s
/// basis) take it as a map of whatever keys a run has: older iolabs and `import` wrote fewer.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct RunEnvironment {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mem_total_kib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mem_free_kib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mem_available_kib: Option<u64>,
    /// meminfo's `Cached`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) page_cache_kib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kernel_cmdline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) iolab_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fio_version: Option<String>,
    /// What fio printed before its report: notes such as "queue depth will be capped at 1"
    /// (see `notes_of`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fio_notes: Option<String>,
    /// Device -> queue knob (`model::devices::KNOBS`, those readable) -> its value, read
    /// once the cell's knobs were written.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) queues: BTreeMap<String, BTreeMap<String, String>>,
}

impl RunEnvironment {
    /// As the store takes it. The stored text has its keys sorted (a `serde_json::Value`'s
    /// objects are), as it had when this was built with `json!`.
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// What is known before fio starts: memory (KiB), the kernel command line, iolab's version,
/// the queue settings of `devices`. A file that cannot be read leaves its keys out.
pub(crate) fn at_start(root: &SysRoot, devices: &[&str]) -> RunEnvironment {
    let mut env = of_iolab();
    if let Ok(Some(meminfo)) = root.read_optional("/proc/meminfo") {
        let kib = |field| meminfo_kib(&meminfo, field);
        env.mem_total_kib = kib("MemTotal");
        env.mem_free_kib = kib("MemFree");
        env.mem_available_kib = kib("MemAvailable");
        env.page_cache_kib = kib("Cached");
    }
    env.kernel_cmdline = root.attr("/proc/cmdline").map(|c| c.trim().to_string());
    for &device in devices {
        let knobs: BTreeMap<String, String> = crate::model::devices::queue_settings(root, device)
            .into_iter()
            .collect();
        if !knobs.is_empty() {
            env.queues.insert(device.to_string(), knobs);
        }
    }
    env
}

/// iolab's version alone (a run on fio servers: their memory is not this machine's).
pub(crate) fn of_iolab() -> RunEnvironment {
    RunEnvironment {
        iolab_version: Some(IOLAB_VERSION.to_string()),
        ..RunEnvironment::default()
    }
}

/// Adds what fio said about itself: its version, and the notes it printed before its report.
pub(crate) fn with_fio(mut env: RunEnvironment, report: Option<&FioReport>) -> serde_json::Value {
    env.fio_version = report.and_then(|r| r.version.clone());
    env.fio_notes = report.and_then(|r| notes_of(&r.preamble));
    env.to_value()
}

/// Notes kept per run, and characters per note: enough for fio's one-line notes, bounded
/// where a job repeats one message per I/O.
const NOTES: usize = 5;
const NOTE_CHARS: usize = 300;

/// fio's lines before its report, each once, in order, joined by " / "; `None` when there
/// were none. fio prints there what it changed or could not do (a queue depth capped at 1 for
/// a synchronous engine, a file it had to lay out), which the run's figures depend on and
/// nobody reads in a matrix of runs.
fn notes_of(preamble: &str) -> Option<String> {
    let mut notes: Vec<String> = Vec::new();
    for line in preamble
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_banner(l))
    {
        let line: String = line.chars().take(NOTE_CHARS).collect();
        if !notes.contains(&line) {
            notes.push(line);
        }
        if notes.len() == NOTES {
            break;
        }
    }
    (!notes.is_empty()).then(|| notes.join(" / "))
}

/// fio's own banner, which its servers send before the report in client mode (each line
/// behind the host's `<name>`): a job's `NAME: (g=0): rw=read, bs=...`, `Starting 1
/// process`, and the bare `<name>` lines between. They say nothing the job file does not.
fn is_banner(line: &str) -> bool {
    let text = match line.strip_prefix('<').and_then(|l| l.split_once('>')) {
        Some((_, rest)) => rest.trim(),
        None => line,
    };
    let starting = text.strip_prefix("Starting ").is_some_and(|rest| {
        let mut words = rest.split_whitespace();
        words.next().is_some_and(|n| n.parse::<u32>().is_ok())
            && words
                .next()
                .is_some_and(|w| w.starts_with("process") || w.starts_with("thread"))
    });
    text.is_empty() || starting || (text.contains(": (g=") && text.contains("): rw="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fios_notes_are_kept_once_each_and_bounded() {
        let capped = "note: both iodepth >= 1 and synchronous I/O engine are selected, queue \
                      depth will be capped at 1";
        let report = FioReport {
            preamble: format!("{capped}\n\n  {capped}\nfio: laying out IO file\n"),
            ..Default::default()
        };
        let env = with_fio(RunEnvironment::default(), Some(&report));
        assert_eq!(
            env["fio_notes"],
            format!("{capped} / fio: laying out IO file").as_str()
        );
        let many: String = (0..40).map(|i| format!("fio: io_u error {i}\n")).collect();
        let notes = notes_of(&many).unwrap();
        assert_eq!(notes.matches(" / ").count(), NOTES - 1, "{notes}");
        assert_eq!(notes_of(&"x".repeat(1000)).unwrap().len(), NOTE_CHARS);
        // Client mode: the servers' banners are not notes; a note behind a host's name is.
        let client = "<lab1> iolab: (g=0): rw=read, bs=(R) 64.0KiB-64.0KiB, (W) \
                      64.0KiB-64.0KiB, (T) 64.0KiB-64.0KiB, ioengine=libaio, iodepth=4\n\
                      <lab1> Starting 1 process\n<lab1> \n<lab2> Starting 2 threads\n\
                      <lab2> note: both iodepth >= 1 and synchronous I/O engine are selected\n";
        assert_eq!(
            notes_of(client).as_deref(),
            Some("<lab2> note: both iodepth >= 1 and synchronous I/O engine are selected")
        );
        assert_eq!(notes_of("<lab1> Starting 1 process\n<lab1>\n"), None);
        // Nothing before the report: no key.
        let env = with_fio(RunEnvironment::default(), Some(&FioReport::default()));
        assert!(env.get("fio_notes").is_none(), "{env}");
    }

    #[test]
    fn memory_cmdline_versions_and_queues_are_read_from_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(
            dir.path().join("proc/meminfo"),
            "MemTotal:        4026532 kB\nMemFree:          123456 kB\n\
             MemAvailable:    2000000 kB\nBuffers:            1000 kB\nCached:          777777 kB\n\
             SwapCached:            0 kB\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("proc/cmdline"),
            "BOOT_IMAGE=/vmlinuz ro quiet\n",
        )
        .unwrap();
        let queue = dir.path().join("sys/block/sdb/queue");
        std::fs::create_dir_all(&queue).unwrap();
        std::fs::write(queue.join("scheduler"), "none [mq-deadline] kyber\n").unwrap();
        std::fs::write(queue.join("nr_requests"), "64\n").unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        let report = FioReport {
            version: Some("fio-3.33".into()),
            ..Default::default()
        };
        // A device with no readable queue (gone, or a partition's name) is left out.
        let env = with_fio(at_start(&root, &["sdb", "sdz"]), Some(&report));
        assert_eq!(
            env["queues"],
            serde_json::json!({"sdb": {"scheduler": "mq-deadline", "nr_requests": "64"}})
        );
        assert_eq!(env["mem_total_kib"], 4026532);
        assert_eq!(env["mem_free_kib"], 123456);
        assert_eq!(env["page_cache_kib"], 777777, "Cached, not SwapCached");
        assert_eq!(env["kernel_cmdline"], "BOOT_IMAGE=/vmlinuz ro quiet");
        assert_eq!(env["fio_version"], "fio-3.33");
        assert!(env["iolab_version"]
            .as_str()
            .unwrap()
            .starts_with(env!("CARGO_PKG_VERSION")));
        // Nothing readable: only what iolab knows of itself.
        let empty = tempfile::tempdir().unwrap();
        let env = at_start(&SysRoot::at(empty.path()).unwrap(), &["sdb"]);
        assert_eq!(env, of_iolab(), "{env:?}");
        assert_eq!(env.to_value().as_object().unwrap().len(), 1);
    }
}

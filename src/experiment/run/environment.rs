//! The environment a run started in, recorded with every run: a run's figures depend on how
//! much memory was free and how much the page cache held when it began (buffered I/O, the
//! kernel's own allocations), on the fio and iolab that produced them, and on the kernel's
//! command line (C-state limits, `nohz_full`, IOMMU and polling settings live there). These
//! change between runs of one experiment, so they are read at each run's start rather than
//! once per experiment as preflight is.

use crate::preflight::parse::meminfo_kib;
use crate::sys::SysRoot;
use crate::workload::FioReport;
use serde_json::{json, Map, Value};

/// iolab's version with the commit it was built from (build.rs).
pub(crate) const IOLAB_VERSION: &str = env!("IOLAB_VERSION");

/// What is known before fio starts: memory (KiB), the kernel command line, iolab's version.
/// A file that cannot be read leaves its keys out.
pub(crate) fn at_start(root: &SysRoot) -> Map<String, Value> {
    let mut env = of_iolab();
    if let Ok(Some(meminfo)) = root.read_optional("/proc/meminfo") {
        for (key, field) in [
            ("mem_total_kib", "MemTotal"),
            ("mem_free_kib", "MemFree"),
            ("mem_available_kib", "MemAvailable"),
            ("page_cache_kib", "Cached"),
        ] {
            if let Some(v) = meminfo_kib(&meminfo, field) {
                env.insert(key.into(), json!(v));
            }
        }
    }
    if let Some(cmdline) = root.attr("/proc/cmdline") {
        env.insert("kernel_cmdline".into(), json!(cmdline.trim()));
    }
    env
}

/// iolab's version alone (a run on fio servers: their memory is not this machine's).
pub(crate) fn of_iolab() -> Map<String, Value> {
    let mut env = Map::new();
    env.insert("iolab_version".into(), json!(IOLAB_VERSION));
    env
}

/// Adds what fio said about itself.
pub(crate) fn with_fio(mut env: Map<String, Value>, report: Option<&FioReport>) -> Value {
    if let Some(v) = report.and_then(|r| r.version.as_deref()) {
        env.insert("fio_version".into(), json!(v));
    }
    Value::Object(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_cmdline_and_versions_are_read_from_the_root() {
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
        let root = SysRoot::at(dir.path()).unwrap();
        let report = FioReport {
            version: Some("fio-3.33".into()),
            ..Default::default()
        };
        let env = with_fio(at_start(&root), Some(&report));
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
        let env = at_start(&SysRoot::at(empty.path()).unwrap());
        assert_eq!(env.len(), 1, "{env:?}");
    }
}

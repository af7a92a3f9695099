//! What a host says about itself in the agent's `hello`: the versions that must match across
//! hosts (iolab, the protocol, fio), the kernel, its Landlock and hostname, and the host's
//! wall clock, read as late as possible so the controller can measure the skew against its
//! own.

use serde::{Deserialize, Serialize};

use crate::sys::SysRoot;

/// The `hello` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Hello {
    /// iolab's version with the commit it was built from.
    pub iolab_version: String,
    pub protocol: u32,
    /// `fio --version` ("fio-3.33"); None when fio is not installed there.
    pub fio_version: Option<String>,
    /// /proc/sys/kernel/osrelease.
    pub kernel: Option<String>,
    pub hostname: Option<String>,
    /// /proc/sys/kernel/random/boot_id: two hosts (or a host and this machine) with the same
    /// one are one running kernel, with one tracer (network namespaces, or two names of one
    /// machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The Landlock ABI its kernel offers; None without Landlock (a fio server its agent
    /// starts, `serve`, needs it).
    #[serde(default)]
    pub landlock_abi: Option<i64>,
    /// MemTotal and MemAvailable of its /proc/meminfo (KiB), to check that the memory fio's
    /// jobs hold there can be spared (`experiment::job_memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_kib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_available_kib: Option<u64>,
    /// CPUs online there: what fio's `$ncpus` stands for in a job (`numjobs = $ncpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_online: Option<u64>,
    /// The agent's network namespace ("net:[4026531840]"): with the boot id, whether an
    /// address of this machine's own (127.0.0.1) reaches the host's fio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_ns: Option<String>,
    /// The host's clock (seconds since the Unix epoch, sub-second) when it answered.
    pub clock_unix: f64,
}

/// `fio --version` of the fio on PATH, trimmed; None when there is none or it fails.
pub(crate) fn fio_version() -> Option<String> {
    let out = std::process::Command::new("fio")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|v| !v.is_empty())
}

/// The running kernel's identity, new at every boot.
pub(crate) const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// This machine's facts. `fio` is passed in: it costs a process, so the agent asks once.
pub(crate) fn hello(root: &SysRoot, fio: Option<String>) -> Hello {
    let text = root.read_optional("/proc/meminfo").ok().flatten();
    let meminfo = |field| crate::preflight::parse::meminfo_kib(text.as_deref()?, field);
    Hello {
        iolab_version: env!("IOLAB_VERSION").to_string(),
        protocol: super::protocol::PROTOCOL_VERSION,
        fio_version: fio,
        kernel: root.attr("/proc/sys/kernel/osrelease"),
        hostname: root.attr("/proc/sys/kernel/hostname"),
        boot_id: root.attr(BOOT_ID),
        landlock_abi: crate::workload::confine::abi_version().ok(),
        mem_total_kib: meminfo("MemTotal"),
        mem_available_kib: meminfo("MemAvailable"),
        cpus_online: crate::sys::online_cpus(root).map(|c| c.len() as u64),
        net_ns: own_net_ns(),
        clock_unix: crate::store::time::now_unix(),
    }
}

/// This process's network namespace, as /proc names it ("net:[4026531840]").
pub(crate) fn own_net_ns() -> Option<String> {
    let link = std::fs::read_link("/proc/self/ns/net").ok()?;
    Some(link.to_string_lossy().into_owned())
}

//! Where a workload runs, and whether it may write there. `ScratchDevice` is the embedded
//! default target (a loop device on /dev/shm that cleans itself up); `holds_data` and
//! `check_write_allowed` enforce the rule that protects users: no writes to a device that
//! holds data unless the user named that exact device as expendable.

mod blkid;
mod data;
mod scratch;
pub(crate) mod signatures;

pub(crate) use data::{device_name, mounts_of, remote_device_name};
pub use data::{holds_data, read_signatures, Reason};
pub(crate) use scratch::{remove_leaked_scratch, DEFAULT_SCRATCH_BYTES};
pub use scratch::{QueueSettings, ScratchDevice};
pub use signatures::Signature;

use crate::sys::SysRoot;

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Sys(#[from] crate::sys::SysError),
    #[error(transparent)]
    State(#[from] crate::knobs::KnobError),
    #[error("/dev/{device}: no such block device (see `iolab inspect` for the devices here)")]
    NoDevice { device: String },
    #[error("scratch device {file}: losetup failed: {why}")]
    Losetup { file: String, why: String },
    #[error("scratch device of {} MiB does not fit in {dir} ({} MiB free); choose a smaller size", size_bytes >> 20, free_bytes >> 20)]
    NoRoom {
        dir: String,
        size_bytes: u64,
        free_bytes: u64,
    },
    #[error("scratch size {size_bytes} bytes: must be at least 1 MiB and a multiple of 4 KiB")]
    BadSize { size_bytes: u64 },
    #[error("refusing to write to /dev/{device}: it may hold data ({}). If its contents are expendable, name it exactly: --destructive-device {device}", reasons.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("; "))]
    HoldsData {
        device: String,
        reasons: Vec<Reason>,
    },
    #[error("refusing to write to /dev/{device}: cannot check whether it holds data ({why})")]
    Unverifiable { device: String, why: String },
}

/// Allows a workload on `device` unless it writes and the device may hold data. Reads are
/// always allowed. `destructive_device` is the user's explicit "this device is expendable";
/// it must name this very device (not its disk or a partition of it). A device that cannot
/// be checked (e.g. no permission to read it) is treated as holding data.
pub fn check_write_allowed(
    device: &str,
    workload_writes: bool,
    destructive_device: Option<&str>,
) -> Result<(), TargetError> {
    check_write_allowed_at(
        &SysRoot::live(),
        device,
        workload_writes,
        destructive_device,
    )
}

pub(crate) fn check_write_allowed_at(
    root: &SysRoot,
    device: &str,
    workload_writes: bool,
    destructive_device: Option<&str>,
) -> Result<(), TargetError> {
    if !workload_writes {
        return Ok(());
    }
    let name = device_name(device);
    if destructive_device.map(device_name).as_deref() == Some(name.as_str()) {
        return Ok(());
    }
    let reasons = match holds_data(root, &name) {
        Ok(r) => r,
        Err(e @ TargetError::NoDevice { .. }) => return Err(e),
        Err(e) => {
            return Err(TargetError::Unverifiable {
                device: name,
                why: e.to_string(),
            })
        }
    };
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(TargetError::HoldsData {
            device: name,
            reasons,
        })
    }
}

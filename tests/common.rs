//! Helpers for the tests that need root and real devices: one way to skip without root, and
//! one scratch device (iolab's own `ScratchDevice`, a loop device over a file in /dev/shm)
//! that is detached and deleted on drop, also when the test fails.

use iolab::target::ScratchDevice;

/// Says why a test cannot run here and lets it return early. On a laptop that is a note on
/// stderr; under CI (`CI=true`) a missing prerequisite is a failure, so a CI machine that lacks
/// root, fio, btt or a loop device can never come out green.
pub fn skip(reason: &str) {
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0") {
        panic!("prerequisite missing under CI: {reason}");
    }
    eprintln!("skipped: {reason}");
}

/// True as root; otherwise says the test is skipped. CI runs as root, so these tests run there.
pub fn root_or_skip() -> bool {
    if !iolab::sys::is_root() {
        skip("needs root");
        return false;
    }
    true
}

/// A scratch loop device with its own state directory (for the leak marker).
pub struct Scratch {
    // Declared first so the device is detached before its state directory goes away.
    pub dev: ScratchDevice,
    _state: tempfile::TempDir,
}

impl Scratch {
    /// A blank device of `bytes`, or None (with a message) when it cannot be made here.
    pub fn new(bytes: u64) -> Option<Scratch> {
        let state = tempfile::tempdir().ok()?;
        match ScratchDevice::create_in(state.path(), bytes) {
            Ok(dev) => Some(Scratch { dev, _state: state }),
            Err(e) => {
                skip(&format!("no scratch device: {e}"));
                None
            }
        }
    }

    /// The kernel name, e.g. `loop3`.
    pub fn name(&self) -> &str {
        self.dev.name()
    }

    /// The device node, e.g. `/dev/loop3`.
    pub fn path(&self) -> String {
        self.dev.dev_path()
    }
}

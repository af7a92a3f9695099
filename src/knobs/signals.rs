//! Ctrl-C and SIGTERM must not kill iolab between "knob changed" and "knob restored". Instead
//! of dying, the process records that a signal arrived. `iolab run` watches the flag from a
//! thread that turns it into the run's cancel token (which stops fio and the run loop), and the
//! `Journal` and scratch-device guards restore everything on the way out; the irq commands
//! sleep through `Interrupt::sleep`, which returns early. Because the handlers only set a
//! flag, a second Ctrl-C during a restore cannot abort it half-way.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

/// The signals that stop iolab the orderly way, everything put back: Ctrl-C, SIGTERM, a
/// terminal or ssh session that closes (SIGHUP), and Ctrl-\ (SIGQUIT, which would otherwise
/// kill it with a core and leave knobs changed until `iolab restore`).
pub(crate) const STOPPING: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// Set when one of [`STOPPING`] arrives; holds the number of the last one.
#[derive(Debug, Clone)]
pub struct Interrupt {
    signal: Arc<AtomicUsize>,
}

impl Interrupt {
    /// Installs the handlers for the rest of the process's life (idempotent: each call adds
    /// handlers that set its own flag).
    pub fn install() -> std::io::Result<Interrupt> {
        let signal = Arc::new(AtomicUsize::new(0));
        for sig in STOPPING {
            signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)?;
        }
        Ok(Interrupt { signal })
    }

    /// True once any of the signals arrived.
    pub fn is_set(&self) -> bool {
        self.signal.load(Ordering::SeqCst) != 0
    }

    /// The signal that arrived last, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s as i32),
        }
    }

    /// Sleeps for `d` in short steps, returning early (false) as soon as a signal arrived;
    /// true when the whole time passed undisturbed.
    pub fn sleep(&self, d: std::time::Duration) -> bool {
        let end = std::time::Instant::now() + d;
        loop {
            if self.is_set() {
                return false;
            }
            let now = std::time::Instant::now();
            if now >= end {
                return true;
            }
            std::thread::sleep((end - now).min(std::time::Duration::from_millis(20)));
        }
    }
}

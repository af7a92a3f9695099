//! Keeps the analysis's two threads on two CPUs. The reader hands each batch to the state
//! machine through a channel, so each wakes the other many times a second; Linux wakes a
//! thread on its waker's CPU when it can (the data it is handed is warm there), and the two
//! then take turns on one CPU until the load balancer moves one, or for the whole run. On a
//! 2-CPU machine the 500 k-event benchmark trace took either about 10 ms (the threads
//! overlapped: 1.6 CPUs busy) or about 15 ms (1.0-1.1 CPUs busy), at the same CPU time: 26
//! of 40 runs took over 13 ms (median 13.9 ms); pinned, none of 40 took over 10.8 ms
//! (median 9.85 ms). Each thread is pinned to a CPU of its own from those the process may
//! use, and the calling thread gets its own set back when the analysis ends (anything it
//! starts later, fio among them, inherits it). The price: a thread whose CPU another program
//! keeps busy cannot move to an idle one while the analysis lasts (a long trace took about 1%
//! longer).

/// The calling thread's CPU set while it is pinned; put back on drop.
pub(super) struct Pinned {
    before: libc::cpu_set_t,
}

/// Which CPUs the calling thread may run on, ascending.
fn allowed() -> Option<(libc::cpu_set_t, Vec<usize>)> {
    // SAFETY: a zeroed cpu_set_t is the empty set, which sched_getaffinity fills in; CPU_ISSET
    // reads within its bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let cpus = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        Some((set, cpus))
    }
}

/// Pins the calling thread to `cpu` (the reader, which ends with the analysis, for good).
pub(super) fn pin_to(cpu: usize) -> bool {
    // SAFETY: as in `allowed`; `cpu` came from the allowed set, so it is below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Pins the calling thread to the CPU it runs on, and returns the CPU the other thread should
/// take (the next allowed one); `None`, and nothing changed, with fewer than two CPUs.
pub(super) fn pin_here() -> Option<(Pinned, usize)> {
    let (before, cpus) = allowed()?;
    if cpus.len() < 2 {
        return None;
    }
    // SAFETY: sched_getcpu has no arguments and only reads.
    let now = unsafe { libc::sched_getcpu() };
    let i = cpus
        .iter()
        .position(|&c| c as i32 == now)
        .unwrap_or_default();
    let (mine, theirs) = (cpus[i], cpus[(i + 1) % cpus.len()]);
    pin_to(mine).then_some((Pinned { before }, theirs))
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: puts back the set sched_getaffinity returned for this thread.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.before);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The calling thread's CPUs.
    pub(in crate::analyze) fn mine() -> Vec<usize> {
        allowed().unwrap().1
    }

    #[test]
    fn each_thread_gets_a_cpu_of_its_own_and_the_caller_its_set_back() {
        let before = mine();
        match pin_here() {
            Some((pinned, theirs)) => {
                let now = mine();
                assert_eq!(now.len(), 1, "{now:?}");
                assert!(before.contains(&now[0]) && before.contains(&theirs));
                assert_ne!(now[0], theirs);
                // The other thread's pin is its own.
                let other = std::thread::spawn(move || {
                    pin_to(theirs);
                    mine()
                });
                assert_eq!(other.join().unwrap(), [theirs]);
                assert_eq!(mine(), now);
                drop(pinned);
            }
            None => assert!(before.len() < 2, "{before:?}"),
        }
        assert_eq!(mine(), before);
    }
}

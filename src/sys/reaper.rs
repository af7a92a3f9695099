//! Ends everything a command started, wherever it went. `trace record -- CMD` runs the command
//! in a process group of its own and ends that group, but a process can leave the group: an
//! interactive shell puts each job in a group of its own, `setsid` and daemons start a
//! session. Their parent then exits and the kernel hands them to init, out of iolab's reach,
//! still doing I/O the recording no longer sees. As the "child subreaper" of its descendants,
//! iolab is handed them instead, so every process the command started stays below iolab,
//! found through `/proc` and ended with the command.
//!
//! Only what came after the command started is the command's: children iolab had before
//! (kept across the `exec` that started iolab, as in `monitor & exec iolab ...`) are left
//! alone with all below them. A process is signalled through a pidfd opened and checked
//! against the start time seen in `/proc`, so a pid reused meanwhile is never hit.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::process::{stat_of, Stat};

/// A process below this one: its pid, command name and start (which tell it from a later
/// process of the same pid).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Descendant {
    pub(crate) pid: i32,
    pub(crate) comm: String,
    start: u64,
    parent: i32,
    zombie: bool,
}

/// What [`Reaper::end_all`] found: the processes it ended, and those still there when it gave
/// up (uninterruptible sleep on a hung device, say).
pub(crate) struct Ended {
    pub(crate) ended: Vec<Descendant>,
    pub(crate) left: Vec<Descendant>,
}

/// This process as the subreaper of what it starts from now on; no longer once dropped.
pub(crate) struct Reaper {
    me: i32,
    /// The children this process had before (pid, start): not the command's.
    before: HashSet<(i32, u64)>,
}

impl Reaper {
    /// Becomes the subreaper of its descendants (`PR_SET_CHILD_SUBREAPER`), noting the
    /// children it has already.
    pub(crate) fn adopt() -> std::io::Result<Reaper> {
        // SAFETY: prctl with integer arguments; it changes only who receives orphans.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let me = std::process::id() as i32;
        let before = all_processes()
            .into_iter()
            .filter(|(_, s)| s.parent == me)
            .map(|(pid, s)| (pid, s.start))
            .collect();
        Ok(Reaper { me, before })
    }

    /// Every process below this one but those below the children it had before, zombies
    /// included, parents first.
    fn descendants(&self) -> Vec<Descendant> {
        below(self.me, &all_processes(), &self.before)
    }

    /// Ends every process below: SIGTERM (with SIGCONT, for one that is stopped) to each once,
    /// up to `grace` for them to go, then SIGKILL once to what is left, and as long again
    /// for that; processes that start meanwhile are found on the next look. Collects the
    /// exit of each that comes to this process.
    pub(crate) fn end_all(&self, grace: Duration) -> Ended {
        let kill_at = Instant::now() + grace;
        let give_up = kill_at + grace;
        // (pid, start) -> whether SIGKILL was sent.
        let mut signalled: HashMap<(i32, u64), bool> = HashMap::new();
        let mut ended: Vec<Descendant> = Vec::new();
        // One look can miss a process whose parent was collected while /proc was read: the
        // end is two empty looks in a row.
        let mut empty_looks = 0;
        while Instant::now() < give_up {
            let mut found = self.descendants();
            for d in found.iter().filter(|d| d.zombie && d.parent == self.me) {
                // SAFETY: waitpid of an exited child of this process, not blocking.
                unsafe { libc::waitpid(d.pid, std::ptr::null_mut(), libc::WNOHANG) };
            }
            found.retain(|d| !(d.zombie && d.parent == self.me));
            if found.is_empty() {
                empty_looks += 1;
                if empty_looks == 2 {
                    break;
                }
            } else {
                empty_looks = 0;
            }
            let kill = Instant::now() >= kill_at;
            for d in found {
                match signalled.get(&(d.pid, d.start)) {
                    None => {
                        // A zombie is done; one whose other threads still run ends with
                        // the signal all the same.
                        if kill {
                            send(&d, libc::SIGKILL);
                        } else {
                            send(&d, libc::SIGTERM);
                            send(&d, libc::SIGCONT);
                        }
                        signalled.insert((d.pid, d.start), kill);
                        if !d.zombie {
                            ended.push(d);
                        }
                    }
                    Some(false) if kill => {
                        send(&d, libc::SIGKILL);
                        signalled.insert((d.pid, d.start), true);
                    }
                    Some(_) => {}
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let left: Vec<Descendant> = self
            .descendants()
            .into_iter()
            .filter(|d| !d.zombie)
            .collect();
        ended.retain(|d| !left.iter().any(|l| (l.pid, l.start) == (d.pid, d.start)));
        Ended { ended, left }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        // SAFETY: as in `adopt`.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) };
    }
}

/// Signals `d` if it is still the process seen: through a pidfd, which cannot reach another
/// process once opened, checked against the start seen in /proc.
fn send(d: &Descendant, signal: i32) {
    // SAFETY: pidfd_open(2) with no flags returns a descriptor this function closes.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, d.pid, 0) } as i32;
    if fd < 0 {
        return; // gone (or a kernel without pidfds, before 5.3: then left alone)
    }
    if stat_of(d.pid).is_some_and(|s| s.start == d.start) {
        // SAFETY: pidfd_send_signal(2) on the descriptor opened above, no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
    }
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(fd) };
}

/// Every process, by pid.
fn all_processes() -> HashMap<i32, Stat> {
    let mut all = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some(stat) = stat_of(pid) {
            all.insert(pid, stat);
        }
    }
    all
}

/// The processes below `root` in `all`, parents first, but for its children in `before`
/// (pid, start) and all below them. Each is visited once, whatever a changing /proc says.
fn below(root: i32, all: &HashMap<i32, Stat>, before: &HashSet<(i32, u64)>) -> Vec<Descendant> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, s) in all {
        children.entry(s.parent).or_default().push(pid);
    }
    let mut found = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        let mut kids = children.get(&parent).cloned().unwrap_or_default();
        kids.sort_unstable();
        for pid in kids {
            let s = &all[&pid];
            if (parent == root && before.contains(&(pid, s.start))) || !seen.insert(pid) {
                continue;
            }
            found.push(Descendant {
                pid,
                comm: s.name.clone(),
                start: s.start,
                parent: s.parent,
                zombie: s.state == 'Z',
            });
            next.push(pid);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Children, grandchildren and below, parents first, zombies marked; a child the process
    /// had before is not the command's, nor anything below it; a cycle (a pid reused while
    /// /proc was read) ends.
    #[test]
    fn descendants_are_the_tree_below_but_what_was_there_before() {
        let all: HashMap<i32, Stat> = [
            // Its parent's pid reused by one below it: a cycle.
            (10, 14, "iolab", 'S', 100),
            (11, 10, "sh", 'Z', 200),
            (12, 11, "dd", 'R', 201),
            (13, 10, "tmux", 'S', 202),
            (14, 13, "bash", 'S', 203),
            (15, 10, "iostat", 'S', 50),
            (16, 15, "child of iostat", 'S', 51),
            (20, 1, "other", 'S', 10),
            (21, 20, "stranger", 'S', 11),
        ]
        .into_iter()
        .map(|(pid, parent, name, state, start)| {
            let stat = Stat {
                name: name.to_string(),
                state,
                parent,
                group: pid,
                start,
            };
            (pid, stat)
        })
        .collect();
        let before = HashSet::from([(15, 50)]);
        let found = below(10, &all, &before);
        let names: Vec<&str> = found.iter().map(|d| d.comm.as_str()).collect();
        assert_eq!(names, ["sh", "tmux", "bash", "dd"]);
        assert!(found[0].zombie && !found[1].zombie);
        // The same pid started later is a process of the command's.
        let later = below(10, &all, &HashSet::from([(15, 49)]));
        assert!(later.iter().any(|d| d.comm == "iostat"));
    }
}

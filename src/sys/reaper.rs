//! Ends everything a command started, wherever it went. `trace record -- CMD` runs the command
//! in a process group of its own and ends that group, but a process can leave the group: an
//! interactive shell puts each job in a group of its own, `setsid` and daemons start a
//! session. Their parent then exits and the kernel hands them to init, out of iolab's reach,
//! still doing I/O the recording no longer sees. As the "child subreaper" of its descendants,
//! iolab is handed them instead, so every process the command started stays a descendant of
//! iolab, found through `/proc` and ended with the command.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Makes this process the subreaper of its descendants (`PR_SET_CHILD_SUBREAPER`).
pub(crate) fn adopt_orphans() -> std::io::Result<()> {
    // SAFETY: prctl with an integer argument; it changes only who receives orphans.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A process below this one: its pid and command name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Descendant {
    pub(crate) pid: i32,
    pub(crate) comm: String,
}

/// Every live process below this one (zombies left out: they are done), parents first.
pub(crate) fn descendants() -> Vec<Descendant> {
    // pid -> (parent, name, zombie), of every process.
    let mut all: HashMap<i32, (i32, String, bool)> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
        {
            all.insert(pid, stat);
        }
    }
    below(std::process::id() as i32, &all)
}

/// (parent, name, zombie) from /proc/PID/stat: "PID (NAME) STATE PPID ...", where NAME may
/// hold spaces and parentheses, so the fields after it count from its last ')'.
fn parse_stat(stat: &str) -> Option<(i32, String, bool)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let mut rest = stat[close + 1..].split_whitespace();
    let state = rest.next()?;
    let parent = rest.next()?.parse().ok()?;
    Some((parent, name, state == "Z"))
}

fn below(root: i32, all: &HashMap<i32, (i32, String, bool)>) -> Vec<Descendant> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, (parent, _, _)) in all {
        children.entry(*parent).or_default().push(pid);
    }
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        let mut kids = children.get(&parent).cloned().unwrap_or_default();
        kids.sort_unstable();
        for pid in kids {
            let (_, comm, zombie) = &all[&pid];
            if !zombie {
                found.push(Descendant {
                    pid,
                    comm: comm.clone(),
                });
            }
            next.push(pid);
        }
    }
    found
}

/// Collects the exit of every process handed to this one that has ended, except `keep`'s
/// (the command itself, whose status its `Child` collects): they would stay zombies, holding
/// their pids, until iolab ends.
pub(crate) fn reap_adopted(keep: Option<u32>) {
    loop {
        // SAFETY: waitid fills `info`, a zeroed siginfo_t; WNOWAIT leaves the child to wait for.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if unsafe { libc::waitid(libc::P_ALL, 0, &mut info, flags) } != 0 {
            return;
        }
        // SAFETY: si_pid of a siginfo_t filled by waitid.
        let pid = unsafe { info.si_pid() };
        if pid <= 0 || keep == Some(pid as u32) {
            return;
        }
        // SAFETY: waitpid of a child that has exited (seen above), not blocking.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

/// Ends every process below this one: SIGTERM (and SIGCONT, for a stopped one) to all, up to
/// `grace` for them to go, then SIGKILL to what is left; returns those that were running.
/// Processes that start meanwhile are found on the next look.
pub(crate) fn end_descendants(grace: Duration) -> Vec<Descendant> {
    let mut ended: Vec<Descendant> = Vec::new();
    let deadline = Instant::now() + grace;
    let mut signal = libc::SIGTERM;
    // Bounded: a fork bomb is not outrun forever; SIGKILL rounds stop at the limit.
    for _ in 0..200 {
        reap_adopted(None);
        let now = descendants();
        if now.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            signal = libc::SIGKILL;
        }
        for d in &now {
            if !ended.iter().any(|e| e.pid == d.pid) {
                ended.push(d.clone());
            }
            // SAFETY: kill(2) of a process found below this one a moment ago.
            unsafe {
                libc::kill(d.pid, signal);
                if signal == libc::SIGTERM {
                    libc::kill(d.pid, libc::SIGCONT);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    reap_adopted(None);
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_parent_name_and_state() {
        assert_eq!(
            parse_stat("42 (a (b) c) S 7 42 42 0 -1"),
            Some((7, "a (b) c".to_string(), false))
        );
        assert_eq!(
            parse_stat("43 (sh) Z 42 1"),
            Some((42, "sh".to_string(), true))
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    /// Children, grandchildren and below, parents first; zombies are not listed, but what is
    /// below one still is.
    #[test]
    fn descendants_are_the_whole_tree_below_without_zombies() {
        let all: HashMap<i32, (i32, String, bool)> = [
            (10, (1, "iolab", false)),
            (11, (10, "sh", true)),
            (12, (11, "dd", false)),
            (13, (10, "tmux", false)),
            (14, (13, "bash", false)),
            (20, (1, "other", false)),
            (21, (20, "stranger", false)),
        ]
        .into_iter()
        .map(|(pid, (parent, name, z))| (pid, (parent, name.to_string(), z)))
        .collect();
        let names: Vec<String> = below(10, &all).into_iter().map(|d| d.comm).collect();
        assert_eq!(names, ["tmux", "bash", "dd"]);
    }
}

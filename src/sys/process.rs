//! Whether the process that wrote a marker still runs. A pid alone says little once the kernel
//! has handed it to another process: pids wrap (an audit reached a killed iolab's pid again
//! after 32 thousand forks), and `iolab restore` then took the stranger for the killed run and
//! left its experiment `running` and its scratch device attached. So markers also record when
//! their process started (`starttime` of /proc/PID/stat, in clock ticks since boot), and a
//! process of that pid that started at another time is not theirs.

/// When process `pid` started, in clock ticks since boot; `None` when there is no such process.
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields after it are counted
    // from its last ')'. starttime is field 22, the 20th after the name.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// This process's start, for a marker to record.
pub(crate) fn own_start() -> Option<u64> {
    start_ticks(std::process::id())
}

/// Whether `pid` runs and is the process a marker recorded as started at `started` (a marker
/// written before starts were recorded is judged by its pid alone).
pub(crate) fn still_running(pid: u32, started: Option<u64>) -> bool {
    start_ticks(pid).is_some_and(|now| started.is_none_or(|s| s == now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_known_by_its_pid_and_its_start() {
        let me = std::process::id();
        let start = own_start().unwrap();
        assert!(still_running(me, Some(start)));
        assert!(still_running(me, None));
        // The same pid, started at another time: another process.
        assert!(!still_running(me, Some(start + 1)));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        assert!(!still_running(gone, None));
    }
}

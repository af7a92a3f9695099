//! Whether the process that wrote a marker still runs. A pid alone says little once the kernel
//! has handed it to another process: pids wrap (an audit reached a killed iolab's pid again
//! after 32 thousand forks), and `iolab restore` then took the stranger for the killed run and
//! left its experiment `running` and its scratch device attached. So markers also record when
//! their process started (`starttime` of /proc/PID/stat, in clock ticks since boot), and a
//! process of that pid that started at another time is not theirs.

/// When process `pid` started, in clock ticks since boot; `None` when there is no such process.
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    stat_of(pid as i32).map(|s| s.start)
}

/// What /proc/PID/stat says of a process that iolab needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stat {
    pub(crate) name: String,
    /// R, S, D, T, Z, ...
    pub(crate) state: char,
    pub(crate) parent: i32,
    pub(crate) group: i32,
    /// In clock ticks since boot: with the pid, which process this is.
    pub(crate) start: u64,
}

/// Process `pid`'s stat line, read; `None` when there is no such process.
pub(crate) fn stat_of(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// "PID (NAME) STATE PPID PGRP ...": the name may hold spaces and parentheses, so the fields
/// after it are counted from its last ')'; starttime is field 22, the 20th after the name.
pub(crate) fn parse_stat(stat: &str) -> Option<Stat> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    Some(Stat {
        name,
        state: rest.first()?.chars().next()?,
        parent: rest.get(1)?.parse().ok()?,
        group: rest.get(2)?.parse().ok()?,
        start: rest.get(19)?.parse().ok()?,
    })
}

/// This process's start, for a marker to record.
pub(crate) fn own_start() -> Option<u64> {
    start_ticks(std::process::id())
}

/// Whether `pid` runs and is the process a marker recorded as started at `started` (a marker
/// written before starts were recorded is judged by its pid alone). A zombie runs no more:
/// a killed iolab stays one until its parent reaps it (a second or more, from some shells),
/// and `iolab restore` run meanwhile took it for a live run and left its experiment `running`.
pub(crate) fn still_running(pid: u32, started: Option<u64>) -> bool {
    stat_of(pid as i32)
        .is_some_and(|s| !matches!(s.state, 'Z' | 'X') && started.is_none_or(|t| t == s.start))
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
        // Exited, not reaped yet: a zombie, which runs no more.
        let zombie = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            stat_of(gone as i32).is_some_and(|s| s.state == 'Z')
        });
        assert!(zombie, "the child never became a zombie");
        assert!(start_ticks(gone).is_some());
        assert!(!still_running(gone, None));
        child.wait().unwrap();
        assert!(!still_running(gone, None));
    }

    #[test]
    fn a_stat_line_gives_name_state_parent_group_and_start() {
        let line = "42 (a (b) c) S 7 40 40 0 -1 4194304 0 0 0 0 1 2 0 0 20 0 1 0 9876 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                name: "a (b) c".into(),
                state: 'S',
                parent: 7,
                group: 40,
                start: 9876,
            })
        );
        assert_eq!(parse_stat("42 (sh) Z 7"), None);
        assert_eq!(
            stat_of(std::process::id() as i32).unwrap().start,
            own_start().unwrap()
        );
    }
}

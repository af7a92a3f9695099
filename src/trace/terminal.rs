//! The terminal, for a command `trace record` runs that reads it. The command runs in a
//! process group of its own, so that ending it ends what it started; on a terminal that is a
//! background group, which the kernel stops (SIGTTIN) the moment it reads the terminal. A
//! shell, a pager or a prompt under `trace record` stopped there, and the recording went on,
//! idle, until Ctrl-C. So iolab does what a shell's `fg` does: once a process of the command's
//! group has stopped, the group is given the terminal and continued. From then on Ctrl-C goes
//! to the command, whose end ends the recording, and Ctrl-Z suspends iolab with it. A command
//! that never touches the terminal (fio) leaves it with iolab, where Ctrl-C stops the
//! recording.

use std::time::{Duration, Instant};

/// How often the command's group is looked at for a stopped process.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The terminal iolab held when the command started.
pub(super) struct Terminal {
    /// iolab's process group, the terminal's foreground one when the command started.
    ours: libc::pid_t,
    /// The command's process group.
    group: libc::pid_t,
    /// Whether the command's group has the terminal now.
    handed: bool,
    looked: Instant,
}

impl Terminal {
    /// For the command leading process group `group`, when standard input is a terminal whose
    /// foreground group is iolab's (not when iolab itself runs in the background).
    pub(super) fn of(group: libc::pid_t) -> Option<Terminal> {
        // SAFETY: queries of this process and of standard input only.
        let ours = unsafe {
            let ours = libc::getpgrp();
            (libc::isatty(0) == 1 && libc::tcgetpgrp(0) == ours).then_some(ours)?
        };
        Some(Terminal {
            ours,
            group,
            handed: false,
            looked: Instant::now(),
        })
    }

    /// Looks, at most every `LOOK_EVERY`, for a stopped process in the command's group. Before
    /// the group has the terminal, it stopped on it: the group is given the terminal and
    /// continued. After, the user suspended it (Ctrl-Z): iolab takes the terminal back and
    /// stops too, so the shell that started iolab gets its prompt back; continued (`fg`), it
    /// gives the command the terminal again and continues it.
    pub(super) fn tend(&mut self) {
        if self.looked.elapsed() < LOOK_EVERY {
            return;
        }
        self.looked = Instant::now();
        if !stopped_in(self.group) {
            return;
        }
        if self.handed {
            set_foreground(self.ours);
            // SAFETY: stops iolab's own process group, as the Ctrl-Z would have had iolab
            // held the terminal; this call returns once it is continued. (The command's group
            // is another.)
            unsafe { libc::kill(0, libc::SIGTSTP) };
        }
        set_foreground(self.group);
        self.handed = true;
        // SAFETY: continues the command's group, which this process started.
        unsafe { libc::kill(-self.group, libc::SIGCONT) };
    }
}

impl Drop for Terminal {
    /// The terminal comes back to iolab (its report, the shell after it).
    fn drop(&mut self) {
        if self.handed {
            set_foreground(self.ours);
        }
    }
}

/// Makes `group` the terminal's foreground group. iolab may be in the background when it
/// does, where the kernel allows it only with SIGTTOU blocked (else it stops the caller).
fn set_foreground(group: libc::pid_t) {
    // SAFETY: the signal mask of this thread, changed and put back around tcsetpgrp.
    unsafe {
        let mut ttou: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut ttou);
        libc::sigaddset(&mut ttou, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &ttou, &mut before);
        libc::tcsetpgrp(0, group);
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
    }
}

/// Whether a process of `group` is stopped.
fn stopped_in(group: libc::pid_t) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| stopped_in_group(&stat, group))
}

/// From a /proc/PID/stat line: stopped by a signal (`T`, not a tracer's `t`) and in `group`.
/// The name, in parentheses, may hold spaces and parentheses: the fields after it start after
/// its last ')'.
fn stopped_in_group(stat: &str, group: libc::pid_t) -> bool {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let pgrp = fields.nth(1).and_then(|p| p.parse::<libc::pid_t>().ok());
    state == Some("T") && pgrp == Some(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_of_the_group_is_found_in_its_stat_line() {
        let line = |state: &str, pgrp: &str| {
            format!("4242 (sh -c (x)) {state} 4200 {pgrp} 4200 34816 4242 4194304 99 0 0 0")
        };
        assert!(stopped_in_group(&line("T", "4242"), 4242));
        assert!(!stopped_in_group(&line("S", "4242"), 4242));
        assert!(!stopped_in_group(&line("t", "4242"), 4242));
        assert!(!stopped_in_group(&line("T", "4200"), 4242));
        assert!(!stopped_in_group("garbage", 4242));
    }
}

//! The terminal, for a command `trace record` runs that reads it. The command runs in a
//! process group of its own, so that ending it ends what it started; on a terminal that is a
//! background group, which the kernel stops (SIGTTIN) the moment it reads the terminal. A
//! shell, a pager or a prompt under `trace record` stopped there, and the recording went on,
//! idle, until Ctrl-C. So iolab does what a shell's `fg` does: once a process of the command's
//! group has stopped while iolab holds the terminal, the group is given the terminal (and the
//! terminal's modes as iolab found them) and continued. From then on Ctrl-C goes to the
//! command, whose end ends the recording, and Ctrl-Z suspends iolab with it. A command that
//! never touches the terminal (fio) leaves it with iolab, where Ctrl-C stops the recording.

use std::time::{Duration, Instant};

/// How often the command's first process is looked at for a stop.
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// How often all of its group is: reading every process's stat costs more.
const LOOK_ALL_EVERY: Duration = Duration::from_secs(1);

/// The terminal iolab held when the command started.
pub(super) struct Terminal {
    /// iolab's process group, the terminal's foreground one when the command started.
    ours: libc::pid_t,
    /// The command's process group (its first process's id).
    group: libc::pid_t,
    /// The terminal's modes when the command started, given back with the terminal (a pager
    /// or shell killed in raw mode would leave it so).
    modes: Option<libc::termios>,
    looked: Instant,
    looked_all: Instant,
}

impl Terminal {
    /// For the command leading process group `group`, when standard input is a terminal whose
    /// foreground group is iolab's (not when iolab itself runs in the background).
    pub(super) fn of(group: libc::pid_t) -> Option<Terminal> {
        // SAFETY: queries of this process and of standard input only.
        let (ours, modes) = unsafe {
            let ours = libc::getpgrp();
            if libc::isatty(0) != 1 || libc::tcgetpgrp(0) != ours {
                return None;
            }
            let mut modes: libc::termios = std::mem::zeroed();
            (ours, (libc::tcgetattr(0, &mut modes) == 0).then_some(modes))
        };
        Some(Terminal {
            ours,
            group,
            modes,
            looked: Instant::now(),
            looked_all: Instant::now(),
        })
    }

    /// Looks for a stopped process in the command's group (its first process every
    /// `LOOK_EVERY`, all of it every `LOOK_ALL_EVERY`), and acts as a shell would on it:
    /// - iolab holds the terminal: the command stopped on it; it is given the terminal and
    ///   continued;
    /// - the command holds it: the user suspended it (Ctrl-Z); iolab takes the terminal back
    ///   and stops too, so that its shell gets its prompt back; continued, it gives the
    ///   command the terminal again if the shell gave it iolab (`fg`), and otherwise
    ///   (`bg`) continues the command without it;
    /// - neither holds it (iolab runs in the background): the command stays stopped, as a
    ///   background job that reads the terminal does, until iolab is brought back.
    pub(super) fn tend(&mut self) {
        if self.looked.elapsed() < LOOK_EVERY {
            return;
        }
        self.looked = Instant::now();
        let all = self.looked_all.elapsed() >= LOOK_ALL_EVERY;
        if all {
            self.looked_all = self.looked;
        }
        if !stopped_in(self.group, all) {
            return;
        }
        let foreground = foreground();
        if foreground == Some(self.group) {
            self.take_back();
            // SAFETY: stops iolab's own process group, as the Ctrl-Z would have had iolab
            // held the terminal; this call returns once it is continued. (The command's group
            // is another.)
            unsafe { libc::kill(0, libc::SIGTSTP) };
            if foreground_is(self.ours) {
                set_foreground(self.group);
            }
            self.continue_command();
        } else if foreground == Some(self.ours) {
            set_foreground(self.group);
            self.continue_command();
        }
    }

    fn continue_command(&self) {
        // SAFETY: continues the command's group, which this process started.
        unsafe { libc::kill(-self.group, libc::SIGCONT) };
    }

    /// The terminal back to iolab, with its modes, if the command has it.
    fn take_back(&self) {
        if !foreground_is(self.group) {
            return;
        }
        set_foreground(self.ours);
        if let Some(modes) = &self.modes {
            // SAFETY: sets standard input's terminal modes to ones tcgetattr read from it.
            unsafe { libc::tcsetattr(0, libc::TCSADRAIN, modes) };
        }
    }
}

impl Drop for Terminal {
    /// The terminal comes back to iolab (its report, the shell after it), if the command has
    /// it: not from the shell, which holds it while iolab runs in the background.
    fn drop(&mut self) {
        self.take_back();
    }
}

/// The terminal's foreground process group.
fn foreground() -> Option<libc::pid_t> {
    // SAFETY: a query of standard input.
    let group = unsafe { libc::tcgetpgrp(0) };
    (group > 0).then_some(group)
}

fn foreground_is(group: libc::pid_t) -> bool {
    foreground() == Some(group)
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

/// Whether the first process of `group` is stopped, or with `all`, any of its processes.
fn stopped_in(group: libc::pid_t, all: bool) -> bool {
    let stopped = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stopped_in_group(&stat, group))
    };
    if stopped(&group.to_string()) {
        return true;
    }
    if !all {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && stopped(n))
    })
}

/// From a /proc/PID/stat line: stopped by a signal (`T`, not a tracer's `t`) and in `group`.
/// The name, in parentheses, may hold spaces and parentheses: the fields after it start after
/// its last ')'.
fn stopped_in_group(stat: &str, group: libc::pid_t) -> bool {
    crate::sys::process::parse_stat(stat).is_some_and(|s| s.state == 'T' && s.group == group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_of_the_group_is_found_in_its_stat_line() {
        let line = |state: &str, pgrp: &str| {
            format!(
                "4242 (sh -c (x)) {state} 4200 {pgrp} 4200 34816 4242 4194304 99 0 0 0 1 2 0 0 \
                 20 0 1 0 9876"
            )
        };
        assert!(stopped_in_group(&line("T", "4242"), 4242));
        assert!(!stopped_in_group(&line("S", "4242"), 4242));
        assert!(!stopped_in_group(&line("t", "4242"), 4242));
        assert!(!stopped_in_group(&line("T", "4200"), 4242));
        assert!(!stopped_in_group("garbage", 4242));
    }
}

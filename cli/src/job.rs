//! The command's process group, seen from `lease run`: its state changes (exited, stopped,
//! continued) as events, signals to the whole group, and the terminal handed to it and back as a
//! shell hands it to a foreground job.

use crossbeam_channel::Receiver;
use nix::errno::Errno;
use nix::sys::signal::{killpg, pthread_sigmask, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, tcgetpgrp, tcsetpgrp, Pid};
use std::fs::File;
use std::time::{Duration, Instant};

/// What became of the command's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Killed(i32),
    /// A signal stopped it (Ctrl-Z, reading the terminal from the background, SIGSTOP).
    Stopped(Signal),
    /// It was continued.
    Continued,
}

/// Follows the process `pid` on a thread of its own until it ends.
pub fn follow(pid: Pid) -> std::io::Result<Receiver<Event>> {
    let (tell, told) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("lease-child".into())
        .spawn(move || loop {
            let flags = WaitPidFlag::WUNTRACED | WaitPidFlag::WCONTINUED;
            let event = match waitpid(pid, Some(flags)) {
                Ok(WaitStatus::Exited(_, code)) => Event::Exited(code),
                Ok(WaitStatus::Signaled(_, signal, _)) => Event::Killed(signal as i32),
                Ok(WaitStatus::Stopped(_, signal)) => Event::Stopped(signal),
                Ok(WaitStatus::Continued(_)) => Event::Continued,
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(_) => return,
            };
            let ended = matches!(event, Event::Exited(_) | Event::Killed(_));
            if tell.send(event).is_err() || ended {
                return;
            }
        })?;
    Ok(told)
}

/// The command's process group.
#[derive(Clone, Copy, Debug)]
pub struct Group(pub Pid);

impl Group {
    /// Sends `signal` to every process of the group; false if none is left.
    pub fn signal(self, signal: Signal) -> bool {
        killpg(self.0, signal).is_ok()
    }

    /// Asks the group to end (SIGTERM, and SIGCONT so that a stopped member gets it).
    pub fn terminate(self) {
        self.signal(Signal::SIGTERM);
        self.signal(Signal::SIGCONT);
    }

    /// Whether any process of the group is left.
    pub fn alive(self) -> bool {
        killpg(self.0, None).is_ok()
    }

    /// Waits until no process of the group is left, at most until `until`.
    pub fn wait_empty(self, until: Instant) -> bool {
        while self.alive() {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }
}

/// The controlling terminal: while `lease` runs in its foreground, the command is given the
/// terminal, as a shell gives it to a foreground job.
pub struct Terminal {
    tty: File,
}

impl Terminal {
    /// The controlling terminal, if this process has one.
    pub fn open() -> Option<Terminal> {
        let tty = File::options()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        Some(Terminal { tty })
    }

    /// Whether this process's group is the terminal's foreground group.
    pub fn owns(&self) -> bool {
        tcgetpgrp(&self.tty).is_ok_and(|group| group == getpgrp())
    }

    /// Makes `group` the terminal's foreground group.
    pub fn give(&self, group: Pid) {
        let _ = tcsetpgrp(&self.tty, group);
    }

    /// Takes the terminal back for this process's group, if `group` has it (it was given to the
    /// command): a terminal some other job has is none of `lease`'s business.
    pub fn take_back(&self, group: Pid) {
        if tcgetpgrp(&self.tty).is_ok_and(|holder| holder == group) {
            let _ = tcsetpgrp(&self.tty, getpgrp());
        }
    }
}

/// Blocks SIGTTOU in this thread and the threads it starts: a process in the background may then
/// hand the terminal on and write to it without being stopped (children start with no signal
/// blocked).
pub fn block_sigttou() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTTOU);
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

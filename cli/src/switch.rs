//! The dead-man's switch seen from `lease run`: started before the command, fed the lease's
//! deadline over a pipe that `lease` never waits on, disarmed when `lease` is done, and heard
//! from on its stdout, where it says what it sent the command (see `keeper` for its side).

use crate::connect::SECRETS;
use crate::exit::{self, Failure};
use crate::job::Group;
use crate::program::this_program;
use crossbeam_channel::Receiver;
use nix::sys::signal::Signal;
use nix::unistd::getpid;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Makes writes to `feed` fail with `WouldBlock` rather than wait when its pipe is full.
fn nonblocking(feed: &ChildStdin) -> nix::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use std::os::fd::AsRawFd;
    let flags = OFlag::from_bits_retain(fcntl(feed.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(
        feed.as_raw_fd(),
        FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK),
    )?;
    Ok(())
}

/// The dead-man's switch (`lease __keeper`), and the pipe that feeds it.
pub struct Keeper {
    child: Option<Child>,
    feed: Option<ChildStdin>,
}

impl Keeper {
    pub fn start(grace: Duration, term_before: Duration) -> Result<Keeper, Failure> {
        let mut command = this_program()?;
        command
            .arg("__keeper")
            .arg("--supervisor")
            .arg(getpid().to_string())
            .arg("--grace-ms")
            .arg(grace.as_millis().to_string())
            .arg("--term-before-ms")
            .arg(term_before.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0);
        for secret in SECRETS {
            command.env_remove(secret);
        }
        let mut child = command.spawn().map_err(|error| {
            Failure::new(
                exit::FAILED,
                format!("cannot start the dead-man's switch: {error}"),
            )
        })?;
        let feed = child
            .stdin
            .take()
            .and_then(|feed| match nonblocking(&feed) {
                Ok(()) => Some(feed),
                Err(error) => {
                    log::warn!("the dead-man's switch is not fed: {error}");
                    None
                }
            });
        Ok(Keeper {
            child: Some(child),
            feed,
        })
    }

    /// Writes one line to the switch, or nothing if its pipe is full: a frozen switch must not
    /// freeze `lease`. A line is shorter than `PIPE_BUF`, so the pipe takes it whole or not at
    /// all; a deadline left out leaves the switch an earlier one, which only stops the job
    /// sooner. Any other failure closes the feed (the switch then stops the job). Returns
    /// whether the line was written.
    fn send(&mut self, line: &str) -> bool {
        let Some(feed) = &mut self.feed else {
            return false;
        };
        match feed.write(line.as_bytes()) {
            Ok(written) if written == line.len() => true,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                log::debug!("the dead-man's switch is behind on its feed: {line:?} left out");
                false
            }
            _ => {
                self.feed = None;
                false
            }
        }
    }

    /// Gives the switch a new deadline; returns whether it was written.
    pub fn deadline(&mut self, deadline: Instant) -> bool {
        self.send(&format!("D {}\n", crate::clock::ns_of(deadline)))
    }

    pub fn group(&mut self, group: Group) {
        self.send(&format!("G {}\n", group.0));
    }

    /// Disarms the switch: the group is gone, or `lease` is done with it.
    pub fn done(&mut self) {
        self.send("X\n");
        self.feed = None;
    }

    /// A channel of the signals the switch says it sends the command, which closes when the
    /// switch process ends.
    pub fn watch(&mut self) -> std::io::Result<Receiver<Signal>> {
        let (tell, told) = crossbeam_channel::unbounded();
        let mut child = self.child.take();
        let said = child.as_mut().and_then(|child| child.stdout.take());
        thread::Builder::new()
            .name("lease-keeper".into())
            .spawn(move || {
                if let Some(said) = said {
                    for line in std::io::BufReader::new(said).lines() {
                        let Ok(line) = line else { break };
                        let signal = match line.split_whitespace().next() {
                            Some("TERM") => Signal::SIGTERM,
                            Some("KILL") => Signal::SIGKILL,
                            _ => continue,
                        };
                        let _ = tell.send(signal);
                    }
                }
                if let Some(mut child) = child {
                    let _ = child.wait();
                }
                drop(tell);
            })?;
        Ok(told)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_switch_that_stops_reading_never_blocks_lease() {
        // A stand-in for a frozen switch: a process that never reads its stdin.
        let mut frozen = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::piped())
            .spawn()
            .expect("start sleep");
        let feed = frozen.stdin.take().expect("piped");
        nonblocking(&feed).expect("fcntl");
        let mut keeper = Keeper {
            child: None,
            feed: Some(feed),
        };
        let (done, finished) = crossbeam_channel::bounded(1);
        let writer = thread::spawn(move || {
            // About 300 KB of deadlines: several times what a pipe holds.
            for _ in 0..10_000 {
                keeper.deadline(Instant::now());
            }
            let fed = keeper.feed.is_some();
            let _ = done.send(());
            fed
        });
        let wrote = finished.recv_timeout(Duration::from_secs(10));
        let _ = frozen.kill();
        let _ = frozen.wait();
        assert!(wrote.is_ok(), "lease blocked on a full feed");
        assert!(
            writer.join().expect("no panic"),
            "a full pipe is not a broken one: the feed stays open"
        );
    }
}

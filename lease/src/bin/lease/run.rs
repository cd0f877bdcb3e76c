//! `lease run`: acquire, run the command in its own process group while the watchdog renews the
//! lease, and make sure the command is stopped by the lease's local deadline whatever happens:
//!
//! * `lease` itself sends SIGTERM to the group `grace` before the deadline (if no renewal moved
//!   it) and SIGKILL at the deadline, and stops the group at once when Redis says the lease is
//!   gone;
//! * a dead-man's switch (`keeper`) does the same if `lease` is killed or frozen;
//! * the command dies with `lease` (its parent-death signal).
//!
//! Job control is handled as a shell does: the command gets the terminal while it runs in the
//! foreground; when it is stopped (Ctrl-Z, reading the terminal from the background), `lease`
//! takes the terminal back and stops itself too, so that nothing renews a lease for a stopped
//! command; when continued, it continues the command only if the lease is still valid.

use crate::connect::SECRETS;
use crate::exit::{self, Failure};
use crate::job::{self, Event, Group, Terminal};
use crate::layout;
use crate::primitive::PrimitiveArgs;
use clap::Args;
use crossbeam_channel::{never, select, Receiver};
use nix::sys::signal::{kill, Signal};
use nix::unistd::{getpid, Pid};
use redis_lease::{Client, LeaseGuard, Lost, LostReason};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct RunArgs {
    /// How long to wait for the lock (default: as long as it takes; 0: try once)
    #[arg(long, value_name = "DURATION", value_parser = crate::duration)]
    wait: Option<Duration>,
    /// How long before the lease's deadline the command gets SIGTERM (SIGKILL comes at the
    /// deadline); at most a third of the lease
    #[arg(
        long,
        default_value = "5s",
        value_name = "DURATION",
        value_parser = crate::duration
    )]
    kill_grace: Duration,
    /// Hold the lock as this owner id instead of a random one: a host or job name, shown by
    /// `lease status` and given to CMD as $LEASE_OWNER. Another `lease run` as the same owner
    /// still waits: a hold is never shared between processes
    #[arg(long, value_name = "ID")]
    owner: Option<String>,
    /// Renew the lease for at most this long in all: then the lease runs out and the command
    /// is stopped as for a lost lease (exit 79); a bound on a job that hangs
    #[arg(long, value_name = "DURATION", value_parser = crate::duration)]
    max_hold: Option<Duration>,
    /// The exit code when the lock was not acquired within --wait, instead of 75 (as flock's
    /// -E): 0 makes "someone else is running it" a success
    #[arg(short = 'E', long, value_name = "CODE")]
    pub conflict_exit_code: Option<u8>,
    #[command(flatten)]
    primitive: PrimitiveArgs,
    /// The lock's name
    pub name: String,
    /// Run this shell command (with /bin/sh -c) instead of CMD, as flock's -c
    #[arg(
        short = 'c',
        long = "command",
        id = "shell",
        value_name = "SHELL_COMMAND"
    )]
    shell: Option<String>,
    /// The command to run, after `--`, and its arguments
    #[arg(
        last = true,
        required_unless_present = "shell",
        conflicts_with = "shell",
        value_name = "CMD"
    )]
    command: Vec<String>,
}

impl RunArgs {
    /// The command line to run: CMD, or `/bin/sh -c SHELL_COMMAND`.
    fn command_line(&self) -> Vec<String> {
        match &self.shell {
            Some(shell) => vec!["/bin/sh".into(), "-c".into(), shell.clone()],
            None => self.command.clone(),
        }
    }
}

/// What the command finds in its environment besides `lease`'s own (less its secrets).
pub const COMMAND_ENVIRONMENT: [(&str, &str); 4] = [
    ("LEASE_NAME", "the lock's name"),
    (
        "LEASE_TOKEN",
        "the fencing token of this hold, above every one before it: pass it to what CMD writes, \
         and have that refuse lower ones (none with --redlock)",
    ),
    (
        "LEASE_OWNER",
        "the hold's owner id, as `lease status` shows it; a credential: keep it to the job",
    ),
    ("LEASE_HELD", "1"),
];

/// What comes before [`COMMAND_ENVIRONMENT`] in the help.
pub fn command_environment() -> String {
    format!(
        "CMD gets the environment of lease, less {}, and with:",
        SECRETS.join(", ")
    )
}

/// What the command finds in its environment, and the exit codes, as `lease run --help` shows
/// them.
pub fn after_help() -> String {
    format!(
        "{}\n{}\n\n{}",
        layout::wrap(&command_environment(), layout::WIDTH).join("\n"),
        layout::columns(&COMMAND_ENVIRONMENT),
        layout::table("Exit codes", &exit::CODES)
    )
}

/// Why `lease` is stopping the command, if it is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The lease was lost, or is about to lapse without a confirmed renewal.
    Lease,
    /// The dead-man's switch ended: the command may not outlive an unguarded `lease`.
    Keeper,
}

struct Stopping {
    why: Stop,
    kill_at: Instant,
    killed: bool,
}

pub fn run(client: &Client, args: RunArgs) -> Result<ExitCode, Failure> {
    let grace = args.kill_grace.min(client.default_lease() / 3);
    // While it waits for the lock, `lease` keeps the signals' default actions: Ctrl-C or a
    // SIGTERM ends the wait (and `lease`) at once, with nothing held that a job could outlive.
    // Once the lock is held, they are caught, to be forwarded to the job.
    let guard = acquire(client, &args)?;
    let signals = match Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP])
    {
        Ok(signals) => signals,
        Err(error) => {
            release(guard);
            return Err(Failure::new(
                exit::FAILED,
                format!("cannot handle signals: {error}"),
            ));
        }
    };
    let mut keeper = match Keeper::start(grace) {
        Ok(keeper) => keeper,
        Err(failure) => {
            release(guard);
            return Err(failure);
        }
    };
    keeper.deadline(guard.valid_until());
    let terminal = Terminal::open();
    let foreground = terminal.as_ref().is_some_and(Terminal::owns);
    let child = match spawn(&args, &guard, foreground) {
        Ok(child) => child,
        Err(failure) => {
            keeper.done();
            release(guard);
            return Err(failure);
        }
    };
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let group = Group(pid);
    keeper.group(group);
    if foreground {
        if let Some(terminal) = &terminal {
            terminal.give(pid);
        }
    }
    let supervised = Supervised {
        name: args.name.clone(),
        group,
        grace,
        terminal,
        guard,
        keeper,
    };
    supervised.run(child, signals)
}

fn acquire(client: &Client, args: &RunArgs) -> Result<LeaseGuard, Failure> {
    let mut lock = args.primitive.lock(client, &args.name)?;
    if let Some(owner) = &args.owner {
        lock = lock.owned_by(owner.as_str());
    }
    if let Some(max_hold) = args.max_hold {
        lock = lock.max_hold(max_hold);
    }
    let acquired = match args.wait {
        None => Some(lock.lock()?),
        Some(wait) if wait.is_zero() => lock.try_lock()?,
        Some(wait) => lock.try_lock_for(wait)?,
    };
    acquired.ok_or_else(|| {
        Failure::new(
            exit::NOT_ACQUIRED,
            format!("{:?} was not acquired within --wait", args.name),
        )
    })
}

fn current_exe() -> Result<std::path::PathBuf, Failure> {
    std::env::current_exe()
        .map_err(|error| Failure::new(exit::FAILED, format!("cannot find this program: {error}")))
}

/// Starts the command (through `lease __exec`) in a process group of its own.
fn spawn(args: &RunArgs, guard: &LeaseGuard, foreground: bool) -> Result<Child, Failure> {
    let mut command = Command::new(current_exe()?);
    command
        .arg("__exec")
        .args(crate::logger::flags())
        .arg("--parent")
        .arg(getpid().to_string());
    if foreground {
        command.arg("--foreground");
    }
    command
        .arg("--")
        .args(args.command_line())
        .env("LEASE_NAME", &args.name)
        .env("LEASE_OWNER", guard.owner())
        .env("LEASE_HELD", "1")
        .process_group(0);
    match guard.fencing_token() {
        Some(token) => command.env("LEASE_TOKEN", token.to_string()),
        None => command.env_remove("LEASE_TOKEN"),
    };
    for secret in SECRETS {
        command.env_remove(secret);
    }
    command
        .spawn()
        .map_err(|error| Failure::new(exit::FAILED, format!("cannot start the command: {error}")))
}

/// `lease run` while the command runs.
struct Supervised {
    name: String,
    group: Group,
    grace: Duration,
    terminal: Option<Terminal>,
    guard: LeaseGuard,
    keeper: Keeper,
}

impl Supervised {
    fn run(mut self, child: Child, signals: Signals) -> Result<ExitCode, Failure> {
        let pid = self.group.0;
        let group = self.group;
        let cannot = |error: std::io::Error| {
            // Unwatched, the job may not run on: `lease` can no longer stop it by the deadline.
            group.signal(Signal::SIGKILL);
            Failure::new(exit::FAILED, format!("cannot start a thread: {error}"))
        };
        let events = job::follow(pid).map_err(cannot)?;
        // Each of these tells once, then disconnects: it is replaced by `never()` when it has
        // told, so that a closed channel is not read as news again and again.
        let mut keeper_gone = self.keeper.watch().map_err(cannot)?;
        let mut forwarded = forward(signals).map_err(cannot)?;
        drop(child);
        let mut lost = self.guard.lost_signal();
        let lease = self.guard.lease();
        let tick = crossbeam_channel::tick(
            (lease / 20).clamp(Duration::from_millis(5), Duration::from_millis(100)),
        );
        let mut stopping: Option<Stopping> = None;
        // The deadline the dead-man's switch was last given: the guard's at the start.
        let mut fed = self.guard.valid_until();
        loop {
            select! {
                recv(events) -> event => match event {
                    Ok(Event::Exited(code)) => {
                        let code = u8::try_from(code).unwrap_or(exit::FAILED);
                        return Ok(self.finish(ExitCode::from(code), None, &stopping));
                    }
                    Ok(Event::Killed(signal)) => {
                        let code = u8::try_from(128 + signal).unwrap_or(exit::FAILED);
                        return Ok(self.finish(ExitCode::from(code), Some(signal), &stopping));
                    }
                    Ok(Event::Stopped(signal)) => {
                        if let Some(code) = self.stopped(signal, &events) {
                            return Ok(code);
                        }
                    }
                    Ok(Event::Continued) => {}
                    Err(_) => {
                        self.group.signal(Signal::SIGKILL);
                        self.keeper.done();
                        self.guard.abandon();
                        return Err(Failure::new(exit::FAILED, "lost track of the command"));
                    }
                },
                recv(lost) -> news => {
                    lost = never();
                    self.lost(news.ok(), &mut stopping);
                }
                recv(forwarded) -> signal => match signal {
                    Ok(signal) => {
                        self.group.signal(signal);
                    }
                    Err(_) => forwarded = never(),
                },
                recv(keeper_gone) -> _ => {
                    keeper_gone = never();
                    if stopping.is_none() {
                        self.group.terminate();
                        log::error!("the dead-man's switch ended: stopping the command");
                        stopping = Some(Stopping {
                            why: Stop::Keeper,
                            kill_at: Instant::now() + self.grace,
                            killed: false,
                        });
                    }
                }
                recv(tick) -> _ => {
                    let deadline = self.guard.valid_until();
                    // A deadline the full pipe left out is sent again at the next tick.
                    if deadline != fed && self.keeper.deadline(deadline) {
                        fed = deadline;
                    }
                    self.enforce(deadline, &mut stopping);
                }
            }
        }
    }

    /// Stops the command by the deadline: SIGTERM `grace` before it, SIGKILL at it.
    fn enforce(&self, deadline: Instant, stopping: &mut Option<Stopping>) {
        let now = Instant::now();
        if stopping.is_none() && now + self.grace >= deadline {
            self.group.terminate();
            log::error!(
                "no renewal of {:?} confirmed and its lease ends in {:?}: stopping the command",
                self.name,
                deadline.saturating_duration_since(now)
            );
            *stopping = Some(Stopping {
                why: Stop::Lease,
                kill_at: deadline,
                killed: false,
            });
        }
        if let Some(stopping) = stopping.as_mut() {
            if !stopping.killed && now >= stopping.kill_at {
                self.group.signal(Signal::SIGKILL);
                stopping.killed = true;
                log::warn!(
                    "the command outlived its grace of {:?}: SIGKILL",
                    self.grace
                );
            }
        }
    }

    fn lost(&self, lost: Option<Lost>, stopping: &mut Option<Stopping>) {
        let now = Instant::now();
        let reason = lost.map(|lost| lost.reason);
        // Past the deadline (or with no news at all), nothing may run any more; taken away
        // (force-unlocked), the command gets its grace.
        let kill_at = match reason {
            Some(LostReason::Taken) => now + self.grace,
            _ => now,
        };
        match stopping {
            Some(stopping) => {
                stopping.why = Stop::Lease;
                stopping.kill_at = stopping.kill_at.min(kill_at);
            }
            None => {
                self.group.terminate();
                *stopping = Some(Stopping {
                    why: Stop::Lease,
                    kill_at,
                    killed: false,
                });
            }
        }
        self.enforce(self.guard.valid_until(), stopping);
        let why = reason.map_or_else(|| "the watchdog stopped".to_owned(), |r| r.to_string());
        log::error!(
            "lost the lease on {:?} ({why}); stopping the command",
            self.name
        );
    }

    /// The command was stopped: stop too, so that nothing renews the lease of a stopped
    /// command; when continued, continue it if the lease is still valid. Returns the exit code
    /// if `lease` is done.
    fn stopped(&mut self, signal: Signal, events: &Receiver<Event>) -> Option<ExitCode> {
        if let Some(terminal) = &self.terminal {
            terminal.take_back(self.group.0);
        }
        log::warn!(
            "the command was stopped ({signal}); so is lease, and its lease is no longer renewed"
        );
        crate::say::flush(Duration::from_millis(100));
        let _ = kill(getpid(), Signal::SIGSTOP);
        // Continued: by a shell's `fg` or `bg`, by anyone, or by the dead-man's switch.
        if self.guard.is_lost() {
            self.group.signal(Signal::SIGKILL);
            let _ = events.recv_timeout(Duration::from_secs(5));
            log::error!(
                "the lease on {:?} ran out while the command was stopped; it was killed",
                self.name
            );
            self.keeper.done();
            crate::say::flush(Duration::from_millis(200));
            return Some(ExitCode::from(exit::LOST));
        }
        if let Some(terminal) = &self.terminal {
            if terminal.owns() {
                terminal.give(self.group.0);
            }
        }
        self.group.signal(Signal::SIGCONT);
        None
    }

    /// The command exited (or `signal` killed it): stop what is left of its group, then
    /// release, and exit with its status (or with the lost code, if `lease` was stopping it).
    fn finish(
        mut self,
        status: ExitCode,
        signal: Option<i32>,
        stopping: &Option<Stopping>,
    ) -> ExitCode {
        // The dead-man's switch may have stopped the command a moment before `lease` would, or
        // ended after stopping it (a frozen `lease`): whoever sent the signal, and whatever
        // `lease` saw first, a command ending with its lease lost or about to lapse was stopped
        // for the lease.
        let near = Instant::now() + self.grace >= self.guard.valid_until();
        let why = if self.guard.is_lost() || near {
            Some(Stop::Lease)
        } else {
            stopping.as_ref().map(|stopping| stopping.why)
        };
        // Say how a command stopped for its lease ended, unless `lease` already said it killed it.
        let reported = stopping.as_ref().is_some_and(|stopping| stopping.killed);
        if let (Some(_), Some(signal), false) = (why, signal, reported) {
            match Signal::try_from(signal) {
                Ok(signal) => log::warn!("the command was killed by {signal}"),
                Err(_) => log::warn!("the command was killed by signal {signal}"),
            }
        }
        if self.group.alive() {
            let until = self.guard.valid_until().min(Instant::now() + self.grace);
            self.group.terminate();
            if !self.group.wait_empty(until) {
                self.group.signal(Signal::SIGKILL);
                self.group
                    .wait_empty(Instant::now() + Duration::from_secs(1));
            }
        }
        self.keeper.done();
        if let Some(terminal) = &self.terminal {
            terminal.take_back(self.group.0);
        }
        let code = match why {
            Some(Stop::Lease) => {
                // The lease is gone, or about to be, and Redis may not answer: nothing to wait for.
                self.guard.abandon();
                ExitCode::from(exit::LOST)
            }
            Some(Stop::Keeper) => {
                release(self.guard);
                ExitCode::from(exit::FAILED)
            }
            None => {
                release(self.guard);
                status
            }
        };
        crate::say::flush(Duration::from_millis(200));
        code
    }
}

fn release(guard: LeaseGuard) {
    let name = guard.name().to_owned();
    if let Err(error) = guard.unlock() {
        log::warn!("releasing {name:?} failed: {error}; it lapses with its lease");
    }
}

/// Delivers the signals `lease` forwards to the command on a channel.
fn forward(mut signals: Signals) -> std::io::Result<Receiver<Signal>> {
    let (tell, told) = crossbeam_channel::unbounded();
    thread::Builder::new()
        .name("lease-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let Ok(signal) = Signal::try_from(signal) else {
                    continue;
                };
                if tell.send(signal).is_err() {
                    break;
                }
            }
        })?;
    Ok(told)
}

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
struct Keeper {
    child: Option<Child>,
    feed: Option<ChildStdin>,
}

impl Keeper {
    fn start(grace: Duration) -> Result<Keeper, Failure> {
        let mut command = Command::new(current_exe()?);
        command
            .arg("__keeper")
            .arg("--supervisor")
            .arg(getpid().to_string())
            .arg("--grace-ms")
            .arg(grace.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
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
    fn deadline(&mut self, deadline: Instant) -> bool {
        self.send(&format!("D {}\n", crate::clock::ns_of(deadline)))
    }

    fn group(&mut self, group: Group) {
        self.send(&format!("G {}\n", group.0));
    }

    /// Disarms the switch: the group is gone, or `lease` is done with it.
    fn done(&mut self) {
        self.send("X\n");
        self.feed = None;
    }

    /// A channel that closes when the switch process ends.
    fn watch(&mut self) -> std::io::Result<Receiver<()>> {
        let (tell, told) = crossbeam_channel::bounded::<()>(0);
        let child = self.child.take();
        thread::Builder::new()
            .name("lease-keeper".into())
            .spawn(move || {
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

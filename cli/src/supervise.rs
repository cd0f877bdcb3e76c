//! `lease run` while the command runs: the command's events, the lease's loss, the signals to
//! forward and the dead-man's switch's news, one `select!` loop that stops the command by the
//! lease's deadline; and how the run ends: what is said, released and returned.

use crate::exit::{self, Failure};
use crate::held::Held;
use crate::human;
use crate::job::{self, Event, Group, Terminal};
use crate::switch::Keeper;
use crossbeam_channel::{never, select, Receiver};
use nix::sys::signal::{kill, Signal};
use nix::unistd::getpid;
use redis_lease::{Lost, LostReason};
use signal_hook::iterator::Signals;
use std::process::{Child, ExitCode};
use std::thread;
use std::time::{Duration, Instant};

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

/// How often `lease` looks at the lease's deadline and feeds the dead-man's switch, besides
/// waking exactly when the command must be stopped.
pub fn look_period(lease: Duration) -> Duration {
    (lease / 20).clamp(Duration::from_millis(5), Duration::from_millis(100))
}

/// How long before the deadline the dead-man's switch sends SIGTERM while `lease` runs: two
/// looks after `lease` itself would (at most half the grace later), so that a deadline a
/// renewal just moved reaches the switch first, and `lease`, which knows why, stops the command
/// when it can. Either way, SIGKILL comes at the deadline.
pub fn switch_term_before(grace: Duration, look: Duration) -> Duration {
    grace - (look * 2).min(grace / 2)
}

/// `lease run` while the command runs.
pub struct Supervised {
    pub name: String,
    pub group: Group,
    pub grace: Duration,
    /// How often the deadline is looked at besides the moments it must be acted on.
    pub look: Duration,
    pub terminal: Option<Terminal>,
    pub guard: Held,
    pub keeper: Keeper,
    /// The deadline the dead-man's switch was last given: the guard's at the start.
    pub fed: Instant,
    /// The first signal the dead-man's switch said it sent the command.
    pub switched: Option<Signal>,
    /// `--max-hold`, and when the hold reaches it (counted from just after the acquisition,
    /// so never before the library stops renewing).
    pub max_hold: Option<(Duration, Instant)>,
}

impl Supervised {
    pub fn run(mut self, child: Child, signals: Signals) -> Result<ExitCode, Failure> {
        let pid = self.group.0;
        let group = self.group;
        let cannot = |error: std::io::Error| {
            // Unwatched, the job may not run on: `lease` can no longer stop it by the deadline.
            group.signal(Signal::SIGKILL);
            Failure::new(exit::FAILED, format!("cannot start a thread: {error}"))
        };
        let events = job::follow(pid).map_err(cannot)?;
        // The switch's news, then its end (the channel closes). `forwarded` and `lost` tell once,
        // then disconnect: each is replaced by `never()` when it has told, so that a closed
        // channel is not read as news again and again.
        let mut switch = Some(self.keeper.watch().map_err(cannot)?);
        let mut forwarded = forward(signals).map_err(cannot)?;
        drop(child);
        let mut lost = self.guard.lost_signal();
        let mut stopping: Option<Stopping> = None;
        let idle = never();
        loop {
            let deadline = self.guard.valid_until();
            // A deadline the full pipe left out is sent again at the next look.
            if deadline != self.fed && self.keeper.deadline(deadline) {
                self.fed = deadline;
            }
            self.enforce(deadline, &mut stopping);
            let wake = crossbeam_channel::at(self.next_look(deadline, &stopping));
            select! {
                recv(events) -> event => match event {
                    Ok(Event::Exited(code)) => {
                        let code = u8::try_from(code).unwrap_or(exit::FAILED);
                        return Ok(self.finish(ExitCode::from(code), None, stopping, switch));
                    }
                    Ok(Event::Killed(signal)) => {
                        let code = u8::try_from(128 + signal).unwrap_or(exit::FAILED);
                        return Ok(self.finish(ExitCode::from(code), Some(signal), stopping, switch));
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
                recv(switch.as_ref().unwrap_or(&idle)) -> news => match news {
                    Ok(signal) => self.switched(signal, &mut stopping),
                    Err(_) => {
                        switch = None;
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
                },
                recv(wake) -> _ => {}
            }
        }
    }

    /// When to look at the deadline next: at the next look, and no later than the moment the
    /// command is due a signal.
    fn next_look(&self, deadline: Instant, stopping: &Option<Stopping>) -> Instant {
        let next = Instant::now() + self.look;
        match stopping {
            None => next.min(deadline.checked_sub(self.grace).unwrap_or(deadline)),
            Some(stopping) if !stopping.killed => next.min(stopping.kill_at),
            Some(_) => next,
        }
    }

    /// The dead-man's switch says it sent `signal` to the command: its deadline came with no
    /// renewal it was told of. `lease` says so, unless it was stopping the command already.
    fn switched(&mut self, signal: Signal, stopping: &mut Option<Stopping>) {
        self.switched.get_or_insert(signal);
        if stopping.is_none() {
            self.say_why_the_lease_stopped_it();
            *stopping = Some(Stopping {
                why: Stop::Lease,
                kill_at: self.fed,
                killed: signal == Signal::SIGKILL,
            });
        }
    }

    /// Whether the hold has reached `--max-hold` by `now`: nothing renews it any more.
    fn held_for_max(&self, now: Instant) -> Option<Duration> {
        self.max_hold
            .and_then(|(limit, reached)| (now >= reached).then_some(limit))
    }

    /// Why the lease ends with no renewal, up to when: the hold reached `--max-hold`, after
    /// which nothing renews it, or no renewal was confirmed in time.
    fn ends_unrenewed_in(&self, now: Instant, left: Duration) -> String {
        match self.held_for_max(now) {
            Some(limit) => format!(
                "{:?} was held for --max-hold {}, so its lease is no longer renewed and ends in {}",
                self.name,
                human::duration(limit),
                human::duration(left)
            ),
            None => format!(
                "no renewal of {:?} confirmed and its lease ends in {}",
                self.name,
                human::duration(left)
            ),
        }
    }

    /// Why a hold was lost, in the tool's terms: `--max-hold`, not the library's `max_hold`.
    fn lost_because(&self, reason: LostReason) -> String {
        match (reason, self.max_hold) {
            (LostReason::MaxHold, Some((limit, _))) => {
                format!("it was held for --max-hold {}", human::duration(limit))
            }
            (reason, _) => reason.to_string(),
        }
    }

    /// Stops the command by the deadline: SIGTERM `grace` before it, SIGKILL at it.
    fn enforce(&self, deadline: Instant, stopping: &mut Option<Stopping>) {
        let now = Instant::now();
        if stopping.is_none() && now + self.grace >= deadline {
            self.group.terminate();
            log::error!(
                "{}: stopping the command",
                self.ends_unrenewed_in(now, deadline.saturating_duration_since(now))
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
                    "the command outlived its grace of {}: SIGKILL",
                    human::duration(self.grace)
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
        let why = reason.map_or_else(
            || "the watchdog stopped".to_owned(),
            |reason| self.lost_because(reason),
        );
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

    /// The command exited (or `signal` killed it): stop what is left of its group, disarm the
    /// switch and hear what it did, then release, and exit with the command's status (or with
    /// the lost code, if the command was stopped for the lease).
    fn finish(
        mut self,
        status: ExitCode,
        signal: Option<i32>,
        stopping: Option<Stopping>,
        switch: Option<Receiver<Signal>>,
    ) -> ExitCode {
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
        // The switch tells what it sent before it sends it, so its line is in the pipe by the
        // time its signal ended the command; it exits when disarmed, closing the channel.
        if let Some(switch) = switch {
            let heard_by = Instant::now() + SWITCH_ANSWER;
            while let Ok(signal) = switch.recv_deadline(heard_by) {
                self.switched.get_or_insert(signal);
            }
        }
        if let Some(terminal) = &self.terminal {
            terminal.take_back(self.group.0);
        }
        let why = self.why_it_ended(signal, &stopping);
        let near = Instant::now() + self.grace >= self.guard.valid_until();
        let code = match why {
            Some(Stop::Lease) if self.guard.is_lost() || near => {
                // The lease is gone, or about to be, and the store may not answer: nothing to
                // wait for.
                self.guard.abandon();
                ExitCode::from(exit::LOST)
            }
            Some(Stop::Lease) => {
                // Stopped by a deadline that a late renewal moved after all: the hold is still
                // good, and the next holder need not wait for it to lapse.
                release(self.guard);
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

    /// Why the command ended, if it was stopped, saying so if nothing was said yet. The switch
    /// may have stopped the command a moment before `lease` would, or while `lease` was frozen:
    /// whoever sent the signal, and whatever `lease` saw first, a command that ended with its
    /// lease lost or about to lapse, or that the switch signalled, was stopped for the lease.
    fn why_it_ended(&self, signal: Option<i32>, stopping: &Option<Stopping>) -> Option<Stop> {
        let near = Instant::now() + self.grace >= self.guard.valid_until();
        let for_lease = self.guard.is_lost() || near || self.switched.is_some();
        let why = match stopping {
            Some(stopping) if !for_lease => Some(stopping.why),
            _ => for_lease.then_some(Stop::Lease),
        };
        if why.is_some() && stopping.is_none() {
            self.say_why_the_lease_stopped_it();
        }
        // Say how a command stopped for its lease ended, unless `lease` already said it killed it.
        let reported = stopping.as_ref().is_some_and(|stopping| stopping.killed);
        if let (Some(_), Some(signal), false) = (why, signal, reported) {
            match Signal::try_from(signal) {
                Ok(signal) => log::warn!("the command was killed by {signal}"),
                Err(_) => log::warn!("the command was killed by signal {signal}"),
            }
        }
        why
    }

    /// The reason a command that ended before `lease` said anything was stopped for its lease.
    fn say_why_the_lease_stopped_it(&self) {
        let now = Instant::now();
        if let Some(signal) = self.switched {
            match self.held_for_max(now) {
                Some(limit) => log::error!(
                    "the dead-man's switch sent the command {signal}: {:?} was held for \
                     --max-hold {}, so its lease was no longer renewed",
                    self.name,
                    human::duration(limit)
                ),
                None => log::error!(
                    "the dead-man's switch sent the command {signal}: no renewal of {:?} was \
                     confirmed in time for the deadline it had",
                    self.name
                ),
            }
        } else if let Some(lost) = self.guard.lost() {
            log::error!(
                "lost the lease on {:?} ({}); the command was stopped",
                self.name,
                self.lost_because(lost.reason)
            );
        } else {
            log::error!(
                "{}: the command was stopped",
                self.ends_unrenewed_in(
                    now,
                    self.guard.valid_until().saturating_duration_since(now)
                )
            );
        }
    }
}

/// How long `lease`, done with the command, waits for the disarmed switch to say what it sent
/// and exit: a switch that is frozen or gone is not waited for longer.
const SWITCH_ANSWER: Duration = Duration::from_millis(500);

pub fn release(guard: Held) {
    let name = guard.name().to_owned();
    if let Err(error) = guard.release() {
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

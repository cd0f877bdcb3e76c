//! `lease __keeper`: the dead-man's switch of `lease run`. A small process of its own (in its
//! own process group, so that signals for `lease` or its terminal do not reach it) that stops
//! the command's process group by the lease's local deadline when `lease` can no longer do it:
//! killed (SIGKILL, the OOM killer) or frozen (SIGSTOP, Ctrl-Z, a debugger).
//!
//! `lease` feeds it on its stdin, one line each:
//!
//! ```text
//! G <pgid>     the command's process group
//! D <ns>       the local deadline, in CLOCK_MONOTONIC nanoseconds (a confirmed renewal moves it)
//! X            done: the group is gone or no longer held for; exit without a signal
//! ```
//!
//! Unless told `X`, the keeper sends SIGTERM (and SIGCONT) to the group `term_before` ahead of the
//! deadline and SIGKILL at the deadline, then SIGCONT to `lease`, so that a frozen `lease` wakes
//! to find its lease lost. `term_before` is `lease`'s own grace less a lag of about two of its
//! looks at the deadline: while `lease` runs, it acts first and says why. `lease` never waits on
//! the pipe: a line that finds it full is left out, so a frozen keeper leaves `lease` running,
//! and the keeper keeps an earlier deadline. If its stdin closes without `X` (`lease` died), it
//! sends SIGTERM at once and SIGKILL after `grace`, or at the deadline if that comes first.
//!
//! Whatever it sends the group, it first says on its stdout, one line each, so that a `lease`
//! that was frozen, or that saw the command end before it saw why, can tell what stopped it:
//!
//! ```text
//! TERM <ns>    SIGTERM, for the deadline <ns> (the last one it was given)
//! KILL <ns>    SIGKILL, likewise
//! ```

use crate::clock;
use clap::Args;
use crossbeam_channel::RecvTimeoutError;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct KeeperArgs {
    /// The `lease` process that feeds this one.
    #[arg(long)]
    supervisor: i32,
    /// How long the command is given between SIGTERM and SIGKILL once `lease` is gone, in
    /// milliseconds.
    #[arg(long)]
    grace_ms: u64,
    /// How long before the deadline the command is asked to stop while `lease` feeds the
    /// switch, in milliseconds.
    #[arg(long)]
    term_before_ms: u64,
}

enum Message {
    Group(i32),
    Deadline(u64),
    Done,
}

/// How often the keeper looks whether the group is gone, once `lease` is.
const LOOK: Duration = Duration::from_millis(10);

pub fn keeper(args: KeeperArgs) -> ExitCode {
    // Signals meant for others (a `pkill lease`, a hang-up) must not disarm the switch.
    for signal in [
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGQUIT,
    ] {
        let _ = signal_hook::flag::register(
            signal,
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        );
    }
    let (tell, messages) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let mut words = line.split_whitespace();
            let message = match (words.next(), words.next().and_then(|n| n.parse().ok())) {
                (Some("G"), Some(group)) => Message::Group(group as i32),
                (Some("D"), Some(deadline)) => Message::Deadline(deadline),
                (Some("X"), _) => Message::Done,
                _ => continue,
            };
            if tell.send(message).is_err() {
                break;
            }
        }
    });
    let grace = args.grace_ms.saturating_mul(1_000_000);
    let term_before = args.term_before_ms.saturating_mul(1_000_000);
    let supervisor = Pid::from_raw(args.supervisor);
    let mut group: Option<crate::job::Group> = None;
    let mut deadline = u64::MAX;
    let mut gone_at: Option<u64> = None;
    let mut terminated = false;
    loop {
        let now = clock::now_ns();
        let (term_at, kill_at) = match gone_at {
            Some(gone) => (gone, deadline.min(gone.saturating_add(grace))),
            None => (deadline.saturating_sub(term_before), deadline),
        };
        if let Some(group) = group {
            if now >= kill_at {
                report("KILL", deadline);
                group.signal(Signal::SIGKILL);
                if gone_at.is_none() {
                    // A frozen `lease` wakes to find its lease lost. One that closed the feed
                    // is gone, and its process id may be another's now.
                    let _ = kill(supervisor, Signal::SIGCONT);
                }
                return ExitCode::SUCCESS;
            }
            if now >= term_at && !terminated {
                report("TERM", deadline);
                group.terminate();
                terminated = true;
            }
            if gone_at.is_some() && !group.alive() {
                return ExitCode::SUCCESS;
            }
        } else if gone_at.is_some() {
            // `lease` died before it started the command: there is nothing to stop.
            return ExitCode::SUCCESS;
        }
        let next = if terminated { kill_at } else { term_at };
        let mut wait = clock::until(next);
        if gone_at.is_some() {
            wait = wait.min(LOOK);
        }
        match messages.recv_timeout(wait) {
            Ok(Message::Group(pgid)) => group = Some(crate::job::Group(Pid::from_raw(pgid))),
            Ok(Message::Deadline(at)) => deadline = at,
            Ok(Message::Done) => return ExitCode::SUCCESS,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) if gone_at.is_none() => {
                gone_at = Some(clock::now_ns());
            }
            Err(RecvTimeoutError::Disconnected) => {
                // Nothing more will come: sleep (at most `LOOK`) instead of spinning.
                std::thread::sleep(wait);
            }
        }
    }
}

/// Tells `lease` on stdout what the switch is about to send, before it does: a `lease` that
/// sees the command end finds the line in the pipe already. Nothing waits on it: a `lease` that
/// is gone makes the write fail, and two short lines never fill a pipe.
fn report(signal: &str, deadline: u64) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{signal} {deadline}");
    let _ = out.flush();
}

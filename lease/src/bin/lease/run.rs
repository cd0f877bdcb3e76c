//! `lease run`: acquire, run the command in its own process group while the watchdog renews the
//! lease, forward signals to it, stop it if the lease is lost, release when it exits.

use crate::exit::{self, Failure};
use clap::Args;
use crossbeam_channel::{select, Receiver};
use lease::{Client, LeaseGuard, Lost};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io::ErrorKind;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::thread;
use std::time::Duration;

#[derive(Args)]
pub struct RunArgs {
    /// How long to wait for the lock (default: as long as it takes; 0: try once)
    #[arg(long, value_name = "DURATION", value_parser = crate::duration)]
    wait: Option<Duration>,
    /// After a lost lease, how long the command has between SIGTERM and SIGKILL
    #[arg(
        long,
        default_value = "5s",
        value_name = "DURATION",
        value_parser = crate::duration
    )]
    kill_grace: Duration,
    /// The lock's name
    name: String,
    /// The command to run, after `--`, and its arguments
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(client: &Client, args: RunArgs) -> Result<ExitCode, Failure> {
    let guard = acquire(client, &args)?;
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|error| Failure::new(exit::FAILED, format!("cannot handle signals: {error}")))?;
    let child = match spawn(&args, &guard) {
        Ok(child) => child,
        Err(failure) => {
            release(guard);
            return Err(failure);
        }
    };
    let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let exited = wait_in_background(child)?;
    let forwarded = forward_signals(signals)?;
    let lost = guard.lost_signal();
    loop {
        select! {
            recv(exited) -> status => {
                let status = status.map_err(|_| {
                    Failure::new(exit::FAILED, "lost track of the command")
                })?;
                release(guard);
                return Ok(pass_through(status));
            }
            recv(lost) -> lost => {
                stop_after_loss(&args, group, &exited, lost.ok());
                // The lease is gone, and Redis may not answer: nothing to wait for.
                guard.abandon();
                return Ok(ExitCode::from(exit::LOST));
            }
            recv(forwarded) -> signal => {
                if let Ok(signal) = signal {
                    send(group, signal);
                }
            }
        }
    }
}

fn acquire(client: &Client, args: &RunArgs) -> Result<LeaseGuard, Failure> {
    let lock = client.lock(&args.name)?;
    let acquired = match args.wait {
        None => Some(lock.lock()?),
        Some(wait) if wait.is_zero() => lock.try_lock()?,
        Some(wait) => lock.try_lock_for(wait)?,
    };
    acquired.ok_or_else(|| {
        let holder = lock
            .inspect()
            .ok()
            .and_then(|state| state.holders.first().map(|(owner, _)| owner.clone()))
            .map_or_else(String::new, |owner| format!(" (held by {owner})"));
        Failure::new(
            exit::NOT_ACQUIRED,
            format!("{:?} was not acquired within --wait{holder}", args.name),
        )
    })
}

fn spawn(args: &RunArgs, guard: &LeaseGuard) -> Result<Child, Failure> {
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| Failure::usage("no command to run after --"))?;
    Command::new(program)
        .args(rest)
        .env("LEASE_NAME", &args.name)
        .env("LEASE_OWNER", guard.owner())
        .env("LEASE_TOKEN", guard.fencing_token().to_string())
        .env("LEASE_HELD", "1")
        .process_group(0)
        .spawn()
        .map_err(|error| {
            let code = match error.kind() {
                ErrorKind::NotFound => exit::NOT_FOUND,
                ErrorKind::PermissionDenied => exit::CANNOT_EXECUTE,
                _ => exit::FAILED,
            };
            Failure::new(code, format!("cannot run {program:?}: {error}"))
        })
}

/// Waits for the child on a thread of its own, so that its exit can be selected on.
fn wait_in_background(mut child: Child) -> Result<Receiver<ExitStatus>, Failure> {
    let (tell, told) = crossbeam_channel::bounded(1);
    thread::Builder::new()
        .name("lease-child".into())
        .spawn(move || {
            if let Ok(status) = child.wait() {
                let _ = tell.send(status);
            }
        })
        .map_err(|error| Failure::new(exit::FAILED, format!("cannot start a thread: {error}")))?;
    Ok(told)
}

/// Delivers SIGINT, SIGTERM and SIGHUP sent to this process on a channel.
fn forward_signals(mut signals: Signals) -> Result<Receiver<i32>, Failure> {
    let (tell, told) = crossbeam_channel::unbounded();
    thread::Builder::new()
        .name("lease-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if tell.send(signal).is_err() {
                    break;
                }
            }
        })
        .map_err(|error| Failure::new(exit::FAILED, format!("cannot start a thread: {error}")))?;
    Ok(told)
}

fn send(group: Pid, signal: i32) {
    if let Ok(signal) = Signal::try_from(signal) {
        if let Err(error) = killpg(group, signal) {
            eprintln!("lease: cannot send {signal} to the command: {error}");
        }
    }
}

/// SIGTERM to the command's group, SIGKILL after the grace period if it is still running.
fn stop_after_loss(args: &RunArgs, group: Pid, exited: &Receiver<ExitStatus>, lost: Option<Lost>) {
    let why = lost.map_or_else(
        || "the watchdog stopped".to_owned(),
        |lost| lost.reason.to_string(),
    );
    eprintln!(
        "lease: lost the lease on {:?} ({why}); stopping the command",
        args.name
    );
    send(group, Signal::SIGTERM as i32);
    if exited.recv_timeout(args.kill_grace).is_err() {
        eprintln!(
            "lease: the command outlived --kill-grace {:?}: SIGKILL",
            args.kill_grace
        );
        send(group, Signal::SIGKILL as i32);
        let _ = exited.recv_timeout(Duration::from_secs(5));
    }
}

fn release(guard: LeaseGuard) {
    let name = guard.lock().name().to_owned();
    if let Err(error) = guard.unlock() {
        eprintln!("lease: releasing {name:?} failed: {error}; it lapses with its lease");
    }
}

/// The command's status as this process's: its exit code, or 128 + the signal that killed it.
fn pass_through(status: ExitStatus) -> ExitCode {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(exit::FAILED)),
        (None, Some(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(exit::FAILED)),
        (None, None) => ExitCode::from(exit::FAILED),
    }
}

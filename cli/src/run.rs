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
use crate::describe::{holders, left};
use crate::exit::{self, Failure};
use crate::held::Held;
use crate::human;
use crate::identity::{self, leader_text, Found};
use crate::job::{Group, Terminal};
use crate::primitive::PrimitiveArgs;
use crate::supervise::{look_period, release, switch_term_before, Supervised};
use crate::switch::Keeper;
use clap::Args;
use nix::unistd::{getpid, Pid};
use redis_lease::{Client, Error};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;
use std::os::unix::process::CommandExt;
use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct RunArgs {
    /// How long to wait for the lock, in seconds or with a unit (10, 500ms, 5m; default: as long
    /// as it takes; 0: try once); with --rate, for a slot (default: try once)
    #[arg(short = 'w', long, value_name = "DURATION", value_parser = crate::duration)]
    wait: Option<Duration>,
    /// Try once, and give up at once if the lock is held (as flock's -n): --wait 0
    #[arg(short = 'n', long = "nonblock", conflicts_with = "wait")]
    nonblock: bool,
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
    /// Run as the leader of the election NAME instead of holding the lock NAME, proclaiming
    /// VALUE while the command leads (`lease leader NAME` shows it); $LEASE_TOKEN is the term
    #[arg(
        long,
        value_name = "VALUE",
        conflicts_with_all = ["permits", "read", "write", "fair", "owner", "max_hold"]
    )]
    value: Option<String>,
    /// Start CMD only if fewer than N runs of NAME started within the last DURATION (10/1m,
    /// 5/30s, 100/1h), across every host, as the store's clock judges; NAME is then a rate
    /// limiter's, not a lock's: no lock is held, and CMD runs in lease's place. No slot free
    /// exits 75 (-E: its code) unless --wait DURATION waits for one. To hold a lock too, run
    /// `lease run LOCK -- CMD` as this CMD
    #[arg(
        long,
        value_name = "N/DURATION",
        value_parser = crate::rated::rate,
        conflicts_with_all = ["value", "permits", "read", "write", "fair", "owner", "max_hold", "kill_grace"]
    )]
    rate: Option<crate::rated::Rate>,
    #[command(flatten)]
    primitive: PrimitiveArgs,
    /// The lock's name (the election's, with --value; the rate limiter's, with --rate)
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
    /// How long to wait: `--wait`, or none with `-n`.
    fn wait(&self) -> Option<Duration> {
        if self.nonblock {
            Some(Duration::ZERO)
        } else {
            self.wait
        }
    }

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
        "the fencing token of this hold (with --value, the term), above every one before it: \
         pass it to what CMD writes, and have that refuse lower ones (none with --redlock)",
    ),
    (
        "LEASE_OWNER",
        "the hold's owner id, as `lease status` shows it; a credential: keep it to the job (not \
         set with --value)",
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

pub fn run(client: &Client, args: RunArgs) -> Result<ExitCode, Failure> {
    if let Some(rate) = args.rate {
        return crate::rated::run(client, &args.name, rate, args.wait(), &args.command_line());
    }
    let grace = args.kill_grace.min(client.default_lease() / 3);
    let look = look_period(client.default_lease());
    // While it waits for the lock, `lease` keeps the signals' default actions: Ctrl-C or a
    // SIGTERM ends the wait (and `lease`) at once, with nothing held that a job could outlive.
    // Once the lock is held, they are caught, to be forwarded to the job.
    let guard = acquire(client, &args)?;
    // Read after the acquisition, so that the hold reaches `--max-hold` here no earlier than
    // the library stops renewing it.
    let max_hold = args.max_hold.map(|limit| (limit, Instant::now() + limit));
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
    let mut keeper = match Keeper::start(grace, switch_term_before(grace, look)) {
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
    let fed = guard.valid_until();
    let supervised = Supervised {
        name: args.name.clone(),
        group,
        grace,
        look,
        terminal,
        guard,
        keeper,
        fed,
        switched: None,
        max_hold,
    };
    supervised.run(child, signals)
}

fn acquire(client: &Client, args: &RunArgs) -> Result<Held, Failure> {
    if let Some(value) = &args.value {
        return lead(client, args, value);
    }
    // An election has keys of its own: a run that took the lock of its name would run beside
    // the leader's.
    if let Some(leader) = identity::leader(client, &args.name)? {
        return Err(Failure::new(
            exit::DATA,
            format!(
                "{:?} is an election ({} leads), not a {}: campaign for it with --value VALUE",
                args.name,
                leader_text(&leader),
                identity::asked(&args.primitive)
            ),
        ));
    }
    let mut lock = args.primitive.lock(client, &args.name)?;
    if let Some(owner) = &args.owner {
        lock = lock.owned_by(owner.as_str());
    }
    if let Some(max_hold) = args.max_hold {
        lock = lock.max_hold(max_hold);
    }
    let acquired = match args.wait() {
        None => lock.lock().map(Some),
        Some(wait) if wait.is_zero() => lock.try_lock(),
        Some(wait) => lock.try_lock_for(wait),
    };
    match acquired {
        Ok(Some(guard)) => Ok(Held::Lock(guard)),
        Ok(None) => Err(held_elsewhere(client, args)),
        Err(error @ Error::WrongType { .. }) => Err(another_primitive(client, args, error)),
        Err(error) => Err(error.into()),
    }
}

/// Campaigns for the election NAME, proclaiming `value`, unless the name is held as a lock, a
/// semaphore or a read-write lock, whose holders the leader would run beside.
fn lead(client: &Client, args: &RunArgs, value: &str) -> Result<Held, Failure> {
    let found = identity::found(client, &args.name)?;
    if found.is_held() {
        let take = match found {
            Found::Lock(_) => "without --value".to_owned(),
            _ => format!("{} instead of --value", found.flags()),
        };
        return Err(Failure::new(
            exit::DATA,
            format!(
                "{:?} is {} that is held now, not an election: take it {take}",
                args.name,
                found.what()
            ),
        ));
    }
    let election = client.election(&args.name)?;
    let led = match args.wait() {
        None => Some(election.campaign(value)?),
        Some(wait) if wait.is_zero() => election.try_campaign(value)?,
        Some(wait) => election.try_campaign_for(wait, value)?,
    };
    led.map(Held::Leader)
        .ok_or_else(|| another_leads(client, args))
}

/// The name's keys are another primitive's than the flags say: which, and the flag that takes
/// it; the library's error where no primitive can use them.
fn another_primitive(client: &Client, args: &RunArgs, error: Error) -> Failure {
    match identity::found(client, &args.name) {
        Ok(found) if !found.takes(&args.primitive) => Failure::new(
            exit::DATA,
            found.mismatch(&args.name, &args.primitive, "take"),
        ),
        _ => error.into(),
    }
}

/// The run did not start: the name is held elsewhere (`-n`, `--wait 0`), or was not acquired
/// within `--wait`; by whom, as `lease status` would say (read again now, so left out if it
/// cannot be read or no one holds it any more).
fn held_elsewhere(client: &Client, args: &RunArgs) -> Failure {
    let by = holders_now(client, args);
    let message = match (args.wait(), by) {
        (Some(wait), by) if !wait.is_zero() => {
            let by = by.map_or_else(String::new, |by| format!(", held elsewhere by {by}"));
            format!(
                "{:?} was not acquired within --wait {}{by}: not run",
                args.name,
                human::duration(wait)
            )
        }
        (_, by) => {
            let by = by.map_or_else(String::new, |by| format!(", by {by}"));
            format!("{:?} is held elsewhere{by}: not run", args.name)
        }
    };
    Failure::skipped(message)
}

/// Who holds what the run asked for: a lock's or a semaphore's holders, a read-write lock's
/// writer (and its readers, for a writer), with the lease left.
fn holders_now(client: &Client, args: &RunArgs) -> Option<String> {
    let asked = &args.primitive;
    if asked.read || asked.write {
        let rw = client.read_write_lock(&args.name).ok()?;
        let writer = rw.write_lock().inspect().ok()?;
        if writer.is_held() {
            return Some(format!(
                "its writer {}, {}",
                holders(&writer),
                left(&writer)
            ));
        }
        let readers = rw.read_lock().inspect().ok()?;
        return (asked.write && readers.is_held())
            .then(|| format!("its readers {}", holders(&readers)));
    }
    let state = asked.lock(client, &args.name).ok()?.inspect().ok()?;
    if !state.is_held() {
        return None;
    }
    let permits = match (asked.permits, state.permits_in_use) {
        (Some(permits), Some(in_use)) => format!(", {in_use} of {permits} permits held"),
        _ => String::new(),
    };
    Some(format!("{}, {}{permits}", holders(&state), left(&state)))
}

/// The campaign did not lead: another candidate does, named by its term and value where one
/// can be read now.
fn another_leads(client: &Client, args: &RunArgs) -> Failure {
    let leader = identity::leader(client, &args.name)
        .ok()
        .flatten()
        .map_or_else(String::new, |leader| format!(" ({})", leader_text(&leader)));
    let within = match args.wait() {
        Some(wait) if !wait.is_zero() => {
            format!(" was not led within --wait {}:", human::duration(wait))
        }
        _ => ":".to_owned(),
    };
    Failure::skipped(format!(
        "{:?}{within} another candidate leads{leader}: not run",
        args.name
    ))
}

/// Starts the command (through `lease __exec`) in a process group of its own.
fn spawn(args: &RunArgs, guard: &Held, foreground: bool) -> Result<Child, Failure> {
    let mut command = crate::program::this_program()?;
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
        .env("LEASE_HELD", "1")
        .process_group(0);
    match guard.owner() {
        Some(owner) => command.env("LEASE_OWNER", owner),
        None => command.env_remove("LEASE_OWNER"),
    };
    match guard.token() {
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

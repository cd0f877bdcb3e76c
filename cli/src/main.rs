//! `lease`: run a command while holding a distributed lease on Redis, ZooKeeper or PostgreSQL,
//! so that exactly one copy of a job runs across many hosts; and look at or clear a lock.
//!
//! ```text
//! lease run --wait 10m nightly-backup -- /usr/local/bin/backup --full
//! lease status nightly-backup --json
//! lease unlock --force nightly-backup
//! ```
//!
//! Everything the tool says on stderr is a log record (see `logger`), written by `say`'s thread of
//! its own; machine output goes to stdout through `say::out`. Neither ever blocks or fails it.
//!
//! The options' doc comments are their `--help` text, written for a terminal (`[user[:password]@]`
//! is a URL's syntax, not a link).
#![allow(rustdoc::broken_intra_doc_links)]

mod apart;
mod clock;
mod connect;
mod describe;
mod examples;
mod exec;
mod exit;
mod held;
mod help;
mod human;
mod identity;
mod interrupt;
mod job;
mod keeper;
mod latch;
mod layout;
mod leader;
mod logger;
mod manual;
mod primitive;
mod program;
mod rated;
mod resize;
mod run;
mod say;
mod status;
mod supervise;
mod switch;
mod unlock;

use clap::error::ErrorKind;
use clap::{ArgAction, ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use connect::Connection;
use exit::Failure;
use redis_lease::Client;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

/// Run a command while holding a lease on Redis, ZooKeeper or PostgreSQL, renewed for as long as
/// the command runs.
#[derive(Parser)]
#[command(name = "lease", version, after_help = help::after_help(None))]
struct Cli {
    #[command(flatten)]
    connection: Connection,
    #[command(flatten)]
    verbosity: Verbosity,
    #[command(subcommand)]
    command: Command,
}

/// How much the tool says on stderr.
#[derive(Args)]
#[command(next_help_heading = "Output (every command)")]
struct Verbosity {
    /// Say more on stderr: -v the lock library's debug log, -vv its trace
    #[arg(long, short, global = true, action = ArgAction::Count)]
    verbose: u8,
    /// Say less on stderr: -q only the failure that explains the exit code, and nothing for a
    /// run skipped because NAME is held elsewhere (as flock -n); -qq nothing
    #[arg(long, short, global = true, action = ArgAction::Count)]
    quiet: u8,
}

#[derive(Subcommand)]
enum Command {
    /// Acquire NAME, run CMD while holding it, release it when CMD exits
    #[command(after_help = help::after_help(Some("run")))]
    Run(run::RunArgs),
    /// Show NAME's holders and fencing tokens, or a latch's count, a rate limiter's grants
    #[command(after_help = help::after_help(Some("status")))]
    Status(status::StatusArgs),
    /// Remove NAME whoever holds it (for clearing a dead holder)
    #[command(after_help = help::after_help(Some("unlock")))]
    Unlock(unlock::UnlockArgs),
    /// Show who leads the election NAME (its term and value), once or as it changes
    #[command(after_help = help::after_help(Some("leader")))]
    Leader(leader::LeaderArgs),
    /// Set a count-down latch's count, count it down, or wait until it is at zero
    #[command(after_help = help::after_help(Some("latch")))]
    Latch(latch::LatchArgs),
    /// Change the number of permits of the semaphore NAME, whoever holds permits now
    #[command(after_help = help::after_help(Some("resize")))]
    Resize(resize::ResizeArgs),
    /// Print a completion script for SHELL on stdout
    #[command(after_help = help::after_help(Some("completions")))]
    Completions(manual::CompletionsArgs),
    /// Print the manual page on stdout, in roff (man -l <(lease man))
    #[command(after_help = help::after_help(Some("man")))]
    Man(manual::ManArgs),
}

/// The tool's own helper processes, started by `lease run` and never by hand: kept out of the
/// command line a person sees (its help, completions and man page).
#[derive(Parser)]
#[command(name = "lease")]
struct Helper {
    #[command(flatten)]
    verbosity: Verbosity,
    #[command(subcommand)]
    process: HelperProcess,
}

#[derive(Subcommand)]
enum HelperProcess {
    /// The dead-man's switch of `lease run`
    #[command(name = "__keeper")]
    Keeper(keeper::KeeperArgs),
    /// The first moment of the command of `lease run`
    #[command(name = "__exec")]
    Exec(exec::ExecArgs),
}

/// Whether this process is one of the tool's helpers: its first argument names one.
fn is_helper() -> bool {
    std::env::args_os()
        .nth(1)
        .is_some_and(|first| first.to_string_lossy().starts_with("__"))
}

/// The variables the tool reads besides the options' own.
pub(crate) const VARIABLES: [(&str, &str); 4] = [
    (
        "REDIS_URL",
        "the server, when neither --url nor LEASE_REDIS_URL gives one",
    ),
    (
        "LEASE_REDIS_PASSWORD",
        "the password (Redis's or PostgreSQL's), when no password file is given",
    ),
    (
        logger::FILTER_VARIABLE,
        "what to log: warn (the default), debug, redis_lease::watchdog=trace,... (-v and -q override \
         its level)",
    ),
    (
        logger::RUST_FILTER_VARIABLE,
        "what to log, when LEASE_LOG is unset",
    ),
];

/// A duration such as `500ms`, `30s`, `5m` or `1h30m`, or a bare number of seconds (`10`,
/// `0.5`), as `flock -w`, `timeout` and `sleep` take it; `0` is allowed.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds)
            .map_err(|_| format!("{text:?} is not a number of seconds from 0"));
    }
    humantime::parse_duration(text).map_err(|error| format!("{error} (try 10, 500ms, 30s, 5m)"))
}

fn main() -> ExitCode {
    if is_helper() {
        return helper();
    }
    // Before any thread starts, so that every thread inherits it: the one that writes to stderr
    // as much as the one that hands the terminal on (see `job::block_sigttou`).
    job::block_sigttou();
    if std::env::args_os().len() <= 1 {
        return help_for_nothing();
    }
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return usage(&error),
    };
    if let Err(error) = cli.connection.check(&matches) {
        return usage(&error);
    }
    logger::install(cli.verbosity.verbose, cli.verbosity.quiet);
    let code = match execute(cli, &matches) {
        Ok(code) => code,
        Err(failure) => failure.report(),
    };
    say::flush(EXIT_FLUSH);
    code
}

fn helper() -> ExitCode {
    let helper = match Helper::try_parse() {
        Ok(helper) => helper,
        Err(error) => return usage(&error),
    };
    logger::install(helper.verbosity.verbose, helper.verbosity.quiet);
    let code = match helper.process {
        HelperProcess::Keeper(args) => keeper::keeper(args),
        HelperProcess::Exec(args) => exec::exec(args),
    };
    say::flush(EXIT_FLUSH);
    code
}

/// How long the tool waits at its exit for what it said to reach stderr: long enough for a
/// stderr thread that a loaded machine schedules late (the tool's work is done: nothing waits on
/// it), short enough that a stderr that cannot be written (a stopped background job's terminal)
/// delays the exit by no more.
const EXIT_FLUSH: Duration = Duration::from_secs(2);

/// `lease` alone, whatever its variables say: the help on stderr, and the usage code.
fn help_for_nothing() -> ExitCode {
    let help = Cli::command().render_help();
    let help = if std::io::stderr().is_terminal() {
        help.ansi().to_string()
    } else {
        help.to_string()
    };
    let _ = std::io::stderr().write_all(format!("{}\n", help.trim_end()).as_bytes());
    ExitCode::from(exit::USAGE)
}

/// Clap's own message, usage and hints on stderr (help and the version on stdout), and the
/// usage code (0 for help and the version). Nothing runs yet that a stuck stderr could hold up.
fn usage(error: &clap::Error) -> ExitCode {
    let _ = error.print();
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
        _ => ExitCode::from(exit::USAGE),
    }
}

fn execute(cli: Cli, matches: &ArgMatches) -> Result<ExitCode, Failure> {
    let connection = &cli.connection;
    match cli.command {
        Command::Run(args) => {
            let name = args.name.clone();
            let conflict = args.conflict_exit_code;
            let servers = connection.servers(matches)?;
            connection
                .client(&servers)
                .and_then(|client| run::run(&client, args))
                .map_err(|failure| {
                    let mut failure =
                        connection.unless_masters_unavailable(&servers, &name, failure);
                    if let (exit::NOT_ACQUIRED, Some(code)) = (failure.code, conflict) {
                        failure.code = code;
                    }
                    servers.named_in(failure)
                })
        }
        Command::Status(args) => {
            with_client(connection, matches, |client| status::status(client, args))
        }
        Command::Unlock(args) => {
            with_client(connection, matches, |client| unlock::unlock(client, args))
        }
        Command::Leader(args) => {
            with_client(connection, matches, |client| leader::leader(client, args))
        }
        Command::Latch(args) => {
            with_client(connection, matches, |client| latch::latch(client, args))
        }
        Command::Resize(args) => {
            with_client(connection, matches, |client| resize::resize(client, args))
        }
        Command::Completions(args) => Ok(manual::completions(args)),
        Command::Man(args) => Ok(manual::man(args)),
    }
}

/// Runs `work` with a client of the servers the options and the environment give; a failure
/// that concerns the servers names them.
fn with_client(
    connection: &Connection,
    matches: &ArgMatches,
    work: impl FnOnce(&Client) -> Result<ExitCode, Failure>,
) -> Result<ExitCode, Failure> {
    let servers = connection.servers(matches)?;
    connection
        .client(&servers)
        .and_then(|client| work(&client))
        .map_err(|failure| servers.named_in(failure))
}

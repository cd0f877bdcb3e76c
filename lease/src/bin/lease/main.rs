//! `lease`: run a command while holding a distributed lease on Redis, so that exactly one copy of
//! a job runs across many hosts; and look at or clear a lock.
//!
//! ```text
//! lease run --wait 10m nightly-backup -- /usr/local/bin/backup --full
//! lease status nightly-backup --json
//! lease unlock --force nightly-backup
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod exit;
mod logger;
mod run;
mod status;

use clap::{Args, Parser, Subcommand};
use exit::Failure;
use lease::Client;
use std::process::ExitCode;
use std::time::Duration;

/// Run a command while holding a lease on Redis, renewed for as long as the command runs.
#[derive(Parser)]
#[command(name = "lease", version, after_help = exit::HELP)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Command,
}

/// Options every command takes.
#[derive(Args)]
struct Common {
    /// The Redis server: redis://[user:password@]host:port[/db]
    #[arg(
        long,
        global = true,
        env = "LEASE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    url: String,
    /// A prefix for every key, to share a server between applications
    #[arg(long, global = true, default_value = "")]
    prefix: String,
    /// The lease, renewed every third of it while held: 500ms, 30s, 5m
    #[arg(
        long,
        global = true,
        default_value = "30s",
        value_name = "DURATION",
        value_parser = duration
    )]
    lease: Duration,
    /// Log what the lock library does on stderr
    #[arg(long, short, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Acquire NAME, run CMD while holding it, release it when CMD exits
    Run(run::RunArgs),
    /// Show whether NAME is held, by whom, for how long, and its last fencing token
    Status(status::StatusArgs),
    /// Remove NAME whoever holds it (for clearing a dead holder)
    Unlock(status::UnlockArgs),
}

/// A duration such as `500ms`, `30s`, `5m` or `1h30m`; `0` is allowed.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|error| format!("{error} (try 500ms, 30s, 5m)"))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = error.print();
                    ExitCode::SUCCESS
                }
                _ => Failure::usage(one_line(&error.to_string())).report(),
            };
        }
    };
    if cli.common.verbose {
        logger::install();
    }
    match execute(cli) {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

/// Clap's message without its usage block, on one line.
fn one_line(text: &str) -> String {
    let message = text.split("\n\nUsage:").next().unwrap_or(text);
    let message = message.replace("For more information, try '--help'.", "");
    let words: Vec<&str> = message.split_whitespace().collect();
    words.join(" ").trim_start_matches("error: ").to_owned()
}

fn execute(cli: Cli) -> Result<ExitCode, Failure> {
    let client = Client::builder(cli.common.url.as_str())
        .key_prefix(cli.common.prefix.as_str())
        .default_lease(cli.common.lease)
        .build()?;
    match cli.command {
        Command::Run(args) => run::run(&client, args),
        Command::Status(args) => status::status(&client, args),
        Command::Unlock(args) => status::unlock(&client, args),
    }
}

//! `lease`: run a command while holding a distributed lease on Redis, so that exactly one copy of
//! a job runs across many hosts; and look at or clear a lock.
//!
//! ```text
//! lease run --wait 10m nightly-backup -- /usr/local/bin/backup --full
//! lease status nightly-backup --json
//! lease unlock --force nightly-backup
//! ```
//!
//! Everything the tool prints goes through `say` (stderr) or `say::out` (stdout), which never
//! block it and never fail it.

mod clock;
mod exec;
mod exit;
mod job;
mod keeper;
mod logger;
mod run;
mod say;
mod status;

use clap::{Args, Parser, Subcommand};
use exit::Failure;
use lease::Client;
use std::path::PathBuf;
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
    /// The Redis server: redis://[user[:password]@]host[:port][/db], rediss://... (TLS) or
    /// redis+unix:///path; several, comma-separated or repeated, with --cluster or --redlock
    #[arg(
        long,
        global = true,
        env = "LEASE_REDIS_URL",
        hide_env_values = true,
        value_delimiter = ',',
        default_value = "redis://127.0.0.1:6379"
    )]
    url: Vec<String>,
    /// The URLs are seed nodes of a Redis Cluster
    #[arg(long, global = true, conflicts_with = "redlock")]
    cluster: bool,
    /// The URLs are independent masters, each lock taken on a quorum of them (RedLock; no
    /// fencing tokens)
    #[arg(long, global = true)]
    redlock: bool,
    /// A PEM file of CA certificates to trust for rediss:// servers, beside the system's
    #[arg(long, global = true, value_name = "FILE")]
    tls_ca_file: Option<PathBuf>,
    /// Read the password from this file, to keep it out of the URL (and out of `ps`); also
    /// taken from $LEASE_REDIS_PASSWORD
    #[arg(long, global = true, value_name = "FILE")]
    password_file: Option<PathBuf>,
    /// A prefix for every key, to share a server between applications
    #[arg(long, global = true, default_value = "")]
    prefix: String,
    /// The lease, renewed every third of it while held: 500ms, 30s, 5m (from 10ms)
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
    /// Show whether NAME is held, by whom, for how long, and its fencing tokens
    Status(status::StatusArgs),
    /// Remove NAME whoever holds it (for clearing a dead holder)
    Unlock(status::UnlockArgs),
    /// The dead-man's switch of `lease run` (started by it, not by hand)
    #[command(name = "__keeper", hide = true)]
    Keeper(keeper::KeeperArgs),
    /// The first moment of the command of `lease run` (started by it, not by hand)
    #[command(name = "__exec", hide = true)]
    Exec(exec::ExecArgs),
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
                _ => {
                    let code = Failure::usage(one_line(&error.to_string())).report();
                    say::flush(Duration::from_millis(200));
                    code
                }
            };
        }
    };
    if cli.common.verbose {
        logger::install();
    }
    let code = match execute(cli) {
        Ok(code) => code,
        Err(failure) => failure.report(),
    };
    say::flush(Duration::from_millis(200));
    code
}

/// Clap's message without its usage block, on one line.
fn one_line(text: &str) -> String {
    let message = text.split("\n\nUsage:").next().unwrap_or(text);
    let message = message.replace("For more information, try '--help'.", "");
    let words: Vec<&str> = message.split_whitespace().collect();
    words.join(" ").trim_start_matches("error: ").to_owned()
}

/// The password given apart from the URL, if any: from `--password-file` (its first line), else
/// from `$LEASE_REDIS_PASSWORD`.
fn password(common: &Common) -> Result<Option<String>, Failure> {
    if let Some(path) = &common.password_file {
        let text = std::fs::read_to_string(path).map_err(|error| {
            Failure::usage(format!("cannot read the password file {path:?}: {error}"))
        })?;
        return Ok(Some(text.lines().next().unwrap_or_default().to_owned()));
    }
    Ok(std::env::var("LEASE_REDIS_PASSWORD").ok())
}

fn execute(cli: Cli) -> Result<ExitCode, Failure> {
    let client = match cli.command {
        Command::Keeper(args) => return Ok(keeper::keeper(args)),
        Command::Exec(args) => return Ok(exec::exec(args)),
        _ => {
            let common = &cli.common;
            let builder = if common.cluster {
                Client::cluster(common.url.iter().cloned())
            } else if common.redlock {
                Client::redlock(common.url.iter().cloned())
            } else {
                match common.url.as_slice() {
                    [url] => Client::builder(url.as_str()),
                    _ => {
                        return Err(Failure::usage(
                            "several URLs need --cluster (seed nodes) or --redlock (masters)",
                        ))
                    }
                }
            };
            let mut builder = builder
                .key_prefix(common.prefix.as_str())
                .default_lease(common.lease);
            if let Some(ca_file) = &common.tls_ca_file {
                builder = builder.tls_ca_file(ca_file);
            }
            if let Some(password) = password(&cli.common)? {
                builder = builder.password(password);
            }
            builder.build()?
        }
    };
    match cli.command {
        Command::Run(args) => run::run(&client, args),
        Command::Status(args) => status::status(&client, args),
        Command::Unlock(args) => status::unlock(&client, args),
        Command::Keeper(_) | Command::Exec(_) => Ok(ExitCode::from(exit::FAILED)),
    }
}

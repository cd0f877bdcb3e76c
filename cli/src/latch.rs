//! `lease latch`: a count-down latch shared by every host of a store: set its count, count it
//! down, or wait until it is at zero.

use crate::exit::{self, printed, Failure};
use crate::human;
use crate::say::out;
use clap::{ArgGroup, Args};
use redis_lease::{Cancel, Client, Error, Latch};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
#[command(group(ArgGroup::new("action").required(true).args(["count", "down", "wait"])))]
pub struct LatchArgs {
    /// The latch's name (a latch is not the lock of the same name)
    name: String,
    /// Give the latch a count of N (from 1), if it is at zero or absent; refused (exit 73)
    /// while it still counts down
    #[arg(long, value_name = "N", value_parser = count)]
    count: Option<u32>,
    /// Count the latch down once, and print the count left (0 at zero, or for a latch that is
    /// not set)
    #[arg(long)]
    down: bool,
    /// Wait until the latch is at zero: exit 0 then, 75 if DURATION passes first (default: as
    /// long as it takes), 66 if it is not set or lapses first; Ctrl-C stops the wait
    #[arg(
        long,
        value_name = "DURATION",
        num_args = 0..=1,
        value_parser = crate::duration
    )]
    wait: Option<Option<Duration>>,
    /// With --count: the latch lapses this long after its last change, its count set or
    /// counted down (1s to a year; default: a day)
    #[arg(
        long,
        value_name = "DURATION",
        conflicts_with_all = ["down", "wait"],
        value_parser = crate::duration
    )]
    expire: Option<Duration>,
    /// Print one JSON object instead of a sentence
    #[arg(long)]
    json: bool,
}

/// A count from 1 to 4294967295: a latch at zero is open already.
fn count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) => Err("a latch's count is from 1: a latch at zero is open already".to_owned()),
        Ok(count) => Ok(count),
        Err(_) => Err(format!("{text:?} is not a count from 1 to {}", u32::MAX)),
    }
}

pub fn latch(client: &Client, args: LatchArgs) -> Result<ExitCode, Failure> {
    let latch = client.latch(&args.name)?;
    if let Some(count) = args.count {
        let latch = match args.expire {
            Some(expiry) => latch.expire_after(expiry),
            None => latch,
        };
        return set(&latch, &args, count);
    }
    if args.down {
        let left = latch.count_down()?;
        return Ok(say(
            &args,
            &format!("{left}"),
            || serde_json::json!({ "name": args.name, "count": left }),
        ));
    }
    wait(&latch, &args, args.wait.flatten())
}

/// Prints `text` (or `json`, with `--json`) unless `-q`.
fn say(args: &LatchArgs, text: &str, json: impl FnOnce() -> serde_json::Value) -> ExitCode {
    if crate::logger::quieted() {
        return ExitCode::SUCCESS;
    }
    if args.json {
        printed(out(&json().to_string()))
    } else {
        printed(out(text))
    }
}

/// Sets the count, unless the latch counts down a round already.
fn set(latch: &Latch, args: &LatchArgs, count: u32) -> Result<ExitCode, Failure> {
    if latch.set_count(count)? {
        let text = format!("{:?}: count {count} set", args.name);
        return Ok(say(
            args,
            &text,
            || serde_json::json!({ "name": args.name, "count": count, "set": true }),
        ));
    }
    let left = latch
        .count()
        .map_or_else(|_| String::new(), |left| format!(" ({left} left)"));
    Err(Failure::new(
        exit::STILL_COUNTING,
        format!(
            "{:?} still counts down{left}: its count is set only at zero or when it is not set; \
             not changed",
            args.name
        ),
    ))
}

/// Waits for the latch to reach zero, up to `within` if given, until a signal stops it.
fn wait(latch: &Latch, args: &LatchArgs, within: Option<Duration>) -> Result<ExitCode, Failure> {
    let name = &args.name;
    let cancel = Cancel::new();
    let stopped = crate::interrupt::on_signals(&cancel)?;
    let latch = latch.cancel_on(&cancel);
    // The library opens a wait at once on a latch it cannot find: the tool tells it apart.
    let state = latch.inspect()?;
    if !state.exists {
        return Err(Failure::new(
            exit::NO_LATCH,
            format!("{name:?} is not set (never set, or lapsed): nothing to wait for"),
        ));
    }
    let waited = match within {
        None => latch.wait().map(|()| true),
        Some(within) => latch.wait_for(within),
    };
    match waited {
        Ok(true) => Ok(say(
            args,
            &format!("{name:?} is at zero"),
            || serde_json::json!({ "name": name, "open": true }),
        )),
        Ok(false) => {
            let left = latch
                .count()
                .map_or_else(|_| String::new(), |left| format!(", {left} left"));
            Err(Failure::new(
                exit::NOT_ACQUIRED,
                format!(
                    "{name:?} did not reach zero within --wait {}{left}",
                    human::duration(within.unwrap_or_default())
                ),
            ))
        }
        Err(Error::Gone { .. }) => Err(Failure::new(
            exit::NO_LATCH,
            format!("{name:?} lapsed before it reached zero"),
        )),
        Err(Error::Cancelled { .. }) => Err(stopped.failure(&format!("{name:?}"))),
        Err(error) => Err(error.into()),
    }
}

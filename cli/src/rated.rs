//! `lease run --rate N/DURATION NAME -- CMD`: CMD starts only if fewer than N runs of NAME
//! started within the last DURATION, across every host, as the store's clock judges (a
//! sliding-window rate limiter named NAME). Nothing is held while CMD runs: once its grant is
//! taken, `lease` becomes CMD (it executes it in its own process), whose exit status is then
//! the tool's.

use crate::connect::SECRETS;
use crate::exit::{self, Failure};
use crate::human;
use redis_lease::{Cancel, Client, Error, RateLimit, RateLimiter, MAX_WINDOW_LIMIT};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};
use std::time::Duration;

/// At most `limit` runs in any `window`: `--rate 10/1m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub limit: u64,
    pub window: Duration,
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.limit, human::duration(self.window))
    }
}

/// `N/DURATION`: N a whole number from 1 to the largest window's limit, DURATION a number with
/// its unit (`500ms`, `30s`, `1m`, `1h`, `1h30m`) from 1 ms to a year: `10/1m`, `5/30s`.
pub fn rate(text: &str) -> Result<Rate, String> {
    let bad = || format!("{text:?} is not N/DURATION, as 10/1m, 5/30s or 100/1h");
    let (limit, window) = text.split_once('/').ok_or_else(bad)?;
    if limit.is_empty() || !limit.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(bad());
    }
    let limit: u64 = limit.parse().unwrap_or(u64::MAX);
    if !(1..=MAX_WINDOW_LIMIT).contains(&limit) {
        return Err(format!(
            "the runs of a rate are from 1 to {MAX_WINDOW_LIMIT}, not {limit}"
        ));
    }
    // A unit is required, and nothing else: `10/60` could mean 60 of anything.
    let strict = window.starts_with(|c: char| c.is_ascii_digit())
        && window.ends_with(|c: char| c.is_ascii_alphabetic())
        && window.chars().all(|c| c.is_ascii_alphanumeric());
    let window = match humantime::parse_duration(window) {
        Ok(window) if strict => window,
        _ => return Err(bad()),
    };
    if !(Duration::from_millis(1)..=Duration::from_secs(365 * 24 * 3600)).contains(&window) {
        return Err(format!(
            "the window of a rate is from 1ms to a year, not {}",
            human::duration(window)
        ));
    }
    Ok(Rate { limit, window })
}

/// Takes a grant of the limiter `name` at `rate` (at once, or within `wait`), then executes
/// `command` in this process: returns only if no grant was taken, or CMD could not be executed.
pub fn run(
    client: &Client,
    name: &str,
    rate: Rate,
    wait: Option<Duration>,
    command: &[String],
) -> Result<ExitCode, Failure> {
    let limiter = client.rate_limiter(name, rate.limit, rate.window)?;
    let granted = match wait {
        None => limiter.try_acquire(1),
        Some(wait) if wait.is_zero() => limiter.try_acquire(1),
        Some(wait) => {
            let cancel = Cancel::new();
            let stopped = crate::interrupt::on_signals(&cancel)?;
            log::info!(
                "waiting up to {} for a slot of {name:?} at {rate}",
                human::duration(wait)
            );
            match limiter.cancel_on(&cancel).try_acquire_for(1, wait) {
                Err(Error::Cancelled { .. }) => {
                    return Err(stopped.failure(&format!("a run of {name:?} at {rate}")))
                }
                granted => granted,
            }
        }
    };
    let granted = match granted {
        Err(Error::InvalidArgument(why)) => return Err(other_rate(&limiter, name, rate, why)),
        granted => granted?,
    };
    if granted.is_none() {
        return Err(no_slot(&limiter, name, rate, wait));
    }
    log::debug!("{name:?}: a run granted at {rate}");
    Ok(execute(name, command))
}

/// The run did not start: as many runs as the rate allows started within its window; when the
/// next slot frees, where the store tells.
fn no_slot(limiter: &RateLimiter, name: &str, rate: Rate, wait: Option<Duration>) -> Failure {
    let next = limiter
        .inspect()
        .ok()
        .and_then(|state| state.next_in)
        .map_or_else(String::new, |next| {
            format!("; the next slot frees in {}", human::duration(next))
        });
    let within = match wait {
        Some(wait) if !wait.is_zero() => {
            format!(", and none frees within --wait {}", human::duration(wait))
        }
        _ => String::new(),
    };
    Failure::skipped(format!(
        "{name:?}: {} runs started within the last {} already (--rate {rate}){within}: not run{next}",
        rate.limit,
        human::duration(rate.window)
    ))
}

/// A run that declared another rate than the one stored with `name`: which one is stored, and
/// what a run may do (the tool has no call to store another while grants count).
fn other_rate(limiter: &RateLimiter, name: &str, rate: Rate, why: String) -> Failure {
    let stored = match limiter.inspect() {
        Ok(state) => state.limit,
        Err(_) => None,
    };
    match stored {
        Some(RateLimit::Window { limit, window })
            if (limit, window) != (rate.limit, rate.window) =>
        {
            Failure::usage(format!(
            "{name:?} is limited to --rate {limit}/{} while its runs count, not {rate}: declare \
             that rate, or wait until its last run leaves its window (at most {}), when the \
             next run stores its own",
                human::duration(window),
                human::duration(window)
            ))
        }
        _ => Failure::usage(why),
    }
}

/// Becomes `command`, with `lease`'s environment less its secrets and with `LEASE_NAME`: returns
/// only if it could not be executed (as `lease __exec` would say).
fn execute(name: &str, command: &[String]) -> ExitCode {
    let Some((program, rest)) = command.split_first() else {
        return ExitCode::from(exit::USAGE);
    };
    let mut cmd = Command::new(program);
    cmd.args(rest).env("LEASE_NAME", name);
    for secret in SECRETS {
        cmd.env_remove(secret);
    }
    // What was said reaches stderr before this process becomes the command.
    crate::say::flush(Duration::from_millis(500));
    let error = cmd.exec();
    let code = match error.kind() {
        std::io::ErrorKind::NotFound => exit::NOT_FOUND,
        std::io::ErrorKind::PermissionDenied => exit::CANNOT_EXECUTE,
        _ => exit::FAILED,
    };
    log::error!("cannot run {program:?}: {error}");
    ExitCode::from(code)
}

//! `redis-cli` runs with a deadline: a command sent to a frozen server is killed, not waited on.

use std::process::Command;
use std::time::Duration;

/// Runs `redis-cli` with `args` and returns what it printed on standard output; `Err` with its
/// standard error (or a timeout notice) when it exits unsuccessfully or runs past `timeout`.
pub(crate) fn run(args: &[String], timeout: Duration) -> Result<String, String> {
    let mut command = Command::new(crate::programs::binary("redis-cli"));
    command.args(args);
    crate::timed_run::output_within(command, &format!("redis-cli {}", args.join(" ")), timeout)
}

/// Runs `redis-cli` with `args`, killed after `timeout`; returns what it printed on standard
/// output, or `Err` with what it printed when it failed or ran too long. `redis-cli` exits
/// successfully after an error reply (such as `NOAUTH`): the reply is in the output.
pub fn redis_cli(args: &[&str], timeout: Duration) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
    run(&args, timeout)
}

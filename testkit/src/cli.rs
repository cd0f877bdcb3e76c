//! `redis-cli` runs with a deadline: a command sent to a frozen server is killed, not waited on.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Runs `redis-cli` with `args` and returns what it printed on standard output; `Err` with its
/// standard error (or a timeout notice) when it exits unsuccessfully or runs past `timeout`.
pub(crate) fn run(args: &[String], timeout: Duration) -> Result<String, String> {
    let mut child = Command::new(crate::programs::binary("redis-cli"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redis-cli");
    // Read both pipes on their own threads, so that a full pipe never stalls the child.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for redis-cli") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    let out = out.join().expect("redis-cli stdout reader");
    let err = err.join().expect("redis-cli stderr reader");
    match status {
        Some(status) if status.success() => Ok(out),
        Some(status) => Err(format!(
            "redis-cli {}: {status}: {err}{out}",
            args.join(" ")
        )),
        None => Err(format!(
            "redis-cli {} killed after {timeout:?}: {err}{out}",
            args.join(" ")
        )),
    }
}

/// Runs `redis-cli` with `args`, killed after `timeout`; returns what it printed on standard
/// output, or `Err` with what it printed when it failed or ran too long. `redis-cli` exits
/// successfully after an error reply (such as `NOAUTH`): the reply is in the output.
pub fn redis_cli(args: &[&str], timeout: Duration) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
    run(&args, timeout)
}

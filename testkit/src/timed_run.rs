//! A helper program run with a deadline: one that hangs on a frozen server is killed, not waited
//! on, and what it printed is kept either way.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Runs `command` and returns what it printed on standard output; `Err` with its standard error
/// (or a notice that it was killed) when it exits unsuccessfully or runs past `timeout`. `what`
/// names it in the error.
pub(crate) fn output_within(
    mut command: Command,
    what: &str,
    timeout: Duration,
) -> Result<String, String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("{what}: cannot start: {error}"))?;
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
        if let Some(status) = child.try_wait().expect("wait for a helper program") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(10));
    };
    let out = out.join().expect("a helper's stdout reader");
    let err = err.join().expect("a helper's stderr reader");
    match status {
        Some(status) if status.success() => Ok(out),
        Some(status) => Err(format!("{what}: {status}: {err}{out}")),
        None => Err(format!("{what} killed after {timeout:?}: {err}{out}")),
    }
}

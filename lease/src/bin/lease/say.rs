//! The tool's messages on stderr, written by a thread of their own: a stderr that is closed, full
//! or stopped (a background job writing to its terminal) never blocks or fails the tool, so
//! nothing it prints can stand between a lost lease and the command being stopped. Lines that
//! cannot be written are dropped.

use crossbeam_channel::{Receiver, Sender};
use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

enum Line {
    Text(String),
    /// Written once every line before it is: the sender of `Flush` waits for it.
    Flush(Sender<()>),
}

static PRINTER: OnceLock<Option<Sender<Line>>> = OnceLock::new();

fn printer() -> Option<&'static Sender<Line>> {
    PRINTER
        .get_or_init(|| {
            let (tell, told) = crossbeam_channel::bounded(256);
            std::thread::Builder::new()
                .name("lease-stderr".into())
                .spawn(move || print(told))
                .ok()
                .map(|_| tell)
        })
        .as_ref()
}

fn print(lines: Receiver<Line>) {
    let mut stderr = std::io::stderr();
    for line in lines {
        match line {
            Line::Text(text) => {
                let _ = stderr.write_all(text.as_bytes());
            }
            Line::Flush(done) => {
                let _ = stderr.flush();
                let _ = done.send(());
            }
        }
    }
}

/// Prints `lease: <message>` on stderr, without waiting for it to be written.
pub fn say(message: impl std::fmt::Display) {
    if let Some(printer) = printer() {
        let _ = printer.try_send(Line::Text(format!("lease: {message}\n")));
    }
}

/// Waits, at most `limit`, for the lines said so far to be written (before the tool exits).
pub fn flush(limit: Duration) {
    if let Some(printer) = printer() {
        let (done, written) = crossbeam_channel::bounded(1);
        if printer.try_send(Line::Flush(done)).is_ok() {
            let _ = written.recv_timeout(limit);
        }
    }
}

/// Writes `text` and a newline on stdout; a closed stdout (`lease status | true`) is not an
/// error worth more than the exit code the caller chooses.
pub fn out(text: &str) -> bool {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .is_ok()
}

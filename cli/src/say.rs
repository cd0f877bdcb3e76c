//! The tool's stderr, written by a thread of its own: a stderr that is closed, full or stopped (a
//! background job writing to its terminal) never blocks or fails the tool, so nothing it prints
//! can stand between a lost lease and the command being stopped. Lines that cannot be written
//! are dropped. Every message reaches it as a log record (see `logger`), through [`Pipe`].

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

/// A writer that hands what it is given to the stderr thread and returns at once: the logger's
/// target. One `write` is one formatted record.
pub struct Pipe;

impl Write for Pipe {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Some(printer) = printer() {
            let text = String::from_utf8_lossy(bytes).into_owned();
            let _ = printer.try_send(Line::Text(text));
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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

/// Writes `bytes` on stdout; a closed stdout (`lease status | true`) is not an error worth more
/// than the exit code the caller chooses.
pub fn out_bytes(bytes: &[u8]) -> bool {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .is_ok()
}

/// Writes `text` and a newline on stdout, as [`out_bytes`] does.
pub fn out(text: &str) -> bool {
    out_bytes(format!("{text}\n").as_bytes())
}

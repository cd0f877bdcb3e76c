//! A wait that a signal stops: SIGINT, SIGTERM or SIGHUP cancels the library's wait (its
//! `Cancel`), and the command exits with 128 + the signal's number.

use crate::exit::{self, Failure};
use redis_lease::Cancel;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// What stopped a wait: the signal, once one came (0 before).
pub struct Stopped(Arc<AtomicI32>);

impl Stopped {
    /// The failure of a wait the signal stopped: `stopped waiting for <what>`, and 128 + its
    /// number.
    pub fn failure(&self, what: &str) -> Failure {
        let signal = self.0.load(Ordering::SeqCst);
        Failure::new(
            exit::interrupted(signal),
            format!("stopped waiting for {what} (signal {signal})"),
        )
    }
}

/// Cancels `cancel` at the first SIGINT, SIGTERM or SIGHUP, caught from now on.
pub fn on_signals(cancel: &Cancel) -> Result<Stopped, Failure> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|error| Failure::new(exit::FAILED, format!("cannot handle signals: {error}")))?;
    let stopped = Arc::new(AtomicI32::new(0));
    let (cancel, seen) = (cancel.clone(), Arc::clone(&stopped));
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                seen.store(signal, Ordering::SeqCst);
                cancel.cancel();
            }
        })
        .map_err(|error| {
            Failure::new(
                exit::FAILED,
                format!("cannot start the signals' thread: {error}"),
            )
        })?;
    Ok(Stopped(stopped))
}

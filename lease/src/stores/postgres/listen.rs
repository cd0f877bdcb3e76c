//! The listening connection of a client: one connection that `LISTEN`s on the schema's channel,
//! on a thread of its own, and wakes this client's waiters of the key each notification names
//! (releases, proclamations and resizes `NOTIFY` it at their commit). Reconnected when it
//! breaks, every waiter then woken to look for itself (a notification may have been lost).
//!
//! The thread also tries, once a second, the undoing of attempts whose answer was lost (see
//! `place.rs`), so that one runs soon after the server answers again.
//!
//! A transaction-mode pooler (PgBouncer) cannot carry `LISTEN`: the session that listens is
//! handed to another client after each transaction. So once listening, the connection checks
//! that a notification sent through the calls' own connections reaches it; if none does, it
//! says so once (a warning naming `postgres_listen_url`), and waiters rely on their re-checks,
//! each at most a second apart, as they do while the connection is down.

use super::shared::Shared;
use crate::error::Result;
use crate::policy::after;
use crate::waiters::{Announcements, Notifier};
use parking_lot::{Condvar, Mutex};
use postgres_blocking::{Config, Connection};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one wait for a notification lasts before the thread looks whether it should stop.
const WAIT: Duration = Duration::from_secs(1);

/// The pause before a broken listening connection is opened again.
const RECONNECT: Duration = Duration::from_millis(200);

/// Announcements when the listener could not start: waiters rely on their re-checks.
pub(crate) struct Silent;

impl Announcements for Silent {
    fn watch(&self, _key: &str, _confirm_by: Instant) {}

    fn unwatch(&self, _key: &str) {}
}

/// What the listening thread and the waiters share.
struct State {
    /// Whether the connection listens now (and a notification sent from now on would be seen).
    listening: Mutex<bool>,
    changed: Condvar,
    stop: AtomicBool,
}

/// The client's listening connection, as its waiters see it. Dropped with the client's waiters,
/// it stops its thread (within a second).
pub(crate) struct Listener {
    state: Arc<State>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Relaxed);
    }
}

impl Announcements for Listener {
    /// Waits, until `confirm_by` at the latest, for the connection to listen.
    fn watch(&self, _key: &str, confirm_by: Instant) {
        let mut listening = self.state.listening.lock();
        while !*listening {
            if self
                .state
                .changed
                .wait_until(&mut listening, confirm_by)
                .timed_out()
            {
                return;
            }
        }
    }

    /// Every key is on the one channel: nothing to undo.
    fn unwatch(&self, _key: &str) {}
}

impl Listener {
    /// Starts the listening thread, named `thread_name`.
    pub(crate) fn start(
        shared: Arc<Shared>,
        config: Config,
        notifier: Notifier,
        thread_name: String,
    ) -> Result<Arc<dyn Announcements>> {
        let state = Arc::new(State {
            listening: Mutex::new(false),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let thread_state = Arc::clone(&state);
        std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || listen(&shared, &config, &notifier, &thread_state))
            .map_err(crate::error::Error::Spawn)?;
        Ok(Arc::new(Listener { state }))
    }
}

/// The listening thread: connects, listens, and passes notifications on, until stopped.
fn listen(shared: &Shared, config: &Config, notifier: &Notifier, state: &State) {
    let mut warned = false;
    while !state.stop.load(Ordering::Relaxed) {
        let deadline = after(shared.call_timeout);
        let mut conn = match open(shared, config, deadline) {
            Ok(conn) => conn,
            Err(error) => {
                log::debug!(
                    "the listening connection to {} failed: {error}",
                    shared.shown
                );
                std::thread::sleep(RECONNECT);
                continue;
            }
        };
        set_listening(state, true);
        // A notification sent while no connection listened was lost: every waiter looks.
        notifier.notify_all();
        let probe = probe(shared);
        let mut probe_by = Some(after(shared.call_timeout * 2));
        while !state.stop.load(Ordering::Relaxed) {
            match conn.wait_notification(Instant::now() + WAIT) {
                Ok(Some(notification)) => {
                    let payload = notification.payload();
                    if probe.as_deref() == Some(payload) {
                        probe_by = None;
                    } else {
                        notifier.notify(payload);
                    }
                }
                Ok(None) => {}
                Err(error) => {
                    log::debug!(
                        "the listening connection to {} broke: {error}",
                        shared.shown
                    );
                    break;
                }
            }
            // An attempt whose answer was lost is undone as soon as the server answers again.
            shared.settle_undos(None, after(shared.call_timeout));
            if probe_by.is_some_and(|by| Instant::now() >= by) {
                probe_by = None;
                if !warned {
                    warned = true;
                    log::warn!(
                        "notifications sent through {} do not reach the listening connection (a \
                         transaction-mode pooler?): give the database's own address with \
                         ClientBuilder::postgres_listen_url; waiters look again every second \
                         meanwhile",
                        shared.shown
                    );
                }
            }
        }
        set_listening(state, false);
    }
}

fn set_listening(state: &State, listening: bool) {
    *state.listening.lock() = listening;
    state.changed.notify_all();
}

/// A listening connection, by `deadline`.
fn open(
    shared: &Shared,
    config: &Config,
    deadline: Instant,
) -> postgres_blocking::Result<Connection> {
    let mut conn = Connection::connect(config, deadline)?;
    conn.batch_execute(&format!("LISTEN \"{}\"", shared.sql.channel), deadline)?;
    Ok(conn)
}

/// Sends a notification through the calls' own connections that no key can be (keys hold a
/// brace), for the listening connection to see; its payload, if it was sent.
fn probe(shared: &Shared) -> Option<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).ok()?;
    let payload = format!(
        "probe {}",
        bytes
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>()
    );
    let deadline = after(shared.call_timeout);
    let channel = shared.sql.channel.clone();
    let sent = shared.pool.call(deadline, |conn| {
        conn.execute(
            "SELECT pg_notify($1, $2)",
            &[Some(&channel), Some(&payload)],
            deadline,
        )
    });
    sent.ok().map(|_| payload)
}

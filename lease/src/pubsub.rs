//! One pub/sub connection per client, on its own thread, carrying every lock channel a waiter of
//! this client is watching. A "freed" message wakes the watchers of that lock; a lost connection is
//! re-opened and every channel subscribed again, and all watchers are woken to look for themselves,
//! since a message may have been lost meanwhile.
//!
//! The blocking client cannot be interrupted in a read, so while any channel is subscribed the
//! thread reads with a short timeout and applies new subscriptions between reads. It sends no
//! command on those timeouts. With nothing subscribed it sleeps until a watcher arrives.

use crate::pool::Pool;
use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

/// How long the reader blocks before looking for new subscriptions.
const POLL: Duration = Duration::from_millis(5);
/// The longest pause between attempts to reconnect.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long an idle connection (nothing watched) is kept open for the next waiter.
const KEEP_IDLE: Duration = Duration::from_secs(30);
/// How long a channel stays subscribed after its last watcher left, so that a lock waited for
/// again and again is not subscribed anew each time.
const KEEP_CHANNEL: Duration = Duration::from_secs(1);

/// A flag a waiter sleeps on.
#[derive(Default)]
pub(crate) struct Signal {
    fired: Mutex<bool>,
    wake: Condvar,
}

impl Signal {
    fn fire(&self) {
        *self.fired.lock() = true;
        self.wake.notify_all();
    }
}

#[derive(Default)]
struct Channels {
    watchers: HashMap<String, Vec<Arc<Signal>>>,
    /// Channels the connection is subscribed to now.
    subscribed: HashSet<String>,
    /// Subscribed channels nobody watches, since when.
    idle_since: HashMap<String, Instant>,
}

struct Shared {
    channels: Mutex<Channels>,
    /// Signalled whenever `subscribed` changes.
    confirmed: Condvar,
    stop: AtomicBool,
    /// Nudges a thread that sleeps with nothing subscribed.
    nudge: Sender<()>,
}

pub(crate) struct Subscriber {
    shared: Arc<Shared>,
}

impl Subscriber {
    /// Starts the subscriber thread. It opens no connection until a channel is watched.
    pub(crate) fn start(pool: Arc<Pool>, thread_name: String) -> std::io::Result<Self> {
        let (nudge, nudged) = crossbeam_channel::bounded(1);
        let shared = Arc::new(Shared {
            channels: Mutex::new(Channels::default()),
            confirmed: Condvar::new(),
            stop: AtomicBool::new(false),
            nudge,
        });
        let weak = Arc::downgrade(&shared);
        thread::Builder::new()
            .name(thread_name)
            .spawn(move || run(weak, pool, nudged))?;
        Ok(Subscriber { shared })
    }

    /// Starts watching `channel`, and waits (until `confirm_by` at the latest) for the
    /// subscription to be in place, so that a message published after this returns is seen.
    pub(crate) fn watch(&self, channel: &str, confirm_by: Instant) -> Watch {
        let signal = Arc::new(Signal::default());
        let mut channels = self.shared.channels.lock();
        channels.idle_since.remove(channel);
        let watchers = channels.watchers.entry(channel.to_owned()).or_default();
        watchers.push(Arc::clone(&signal));
        if watchers.len() == 1 {
            let _ = self.shared.nudge.try_send(());
        }
        while !channels.subscribed.contains(channel) {
            if self
                .shared
                .confirmed
                .wait_until(&mut channels, confirm_by)
                .timed_out()
            {
                log::debug!(
                    "subscription to {channel} not confirmed in time; relying on re-checks"
                );
                break;
            }
        }
        Watch {
            shared: Arc::clone(&self.shared),
            channel: channel.to_owned(),
            signal,
        }
    }

    /// Wakes this client's watchers of `channel` without waiting for the message to come back
    /// from Redis: used when this client freed the lock itself.
    pub(crate) fn notify_local(&self, channel: &str) {
        if let Some(watchers) = self.shared.channels.lock().watchers.get(channel) {
            watchers.iter().for_each(|signal| signal.fire());
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.shared.nudge.try_send(());
    }
}

/// A waiter's registration on one channel; unregisters on drop.
pub(crate) struct Watch {
    shared: Arc<Shared>,
    channel: String,
    signal: Arc<Signal>,
}

impl Watch {
    /// Sleeps until the channel fires or `until` passes. Returns whether it fired. The signal is
    /// consumed: the next call waits for the next one.
    pub(crate) fn wait(&self, until: Instant) -> bool {
        let mut fired = self.signal.fired.lock();
        while !*fired {
            if self.signal.wake.wait_until(&mut fired, until).timed_out() {
                break;
            }
        }
        std::mem::replace(&mut *fired, false)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut channels = self.shared.channels.lock();
        if let Some(watchers) = channels.watchers.get_mut(&self.channel) {
            watchers.retain(|signal| !Arc::ptr_eq(signal, &self.signal));
            if watchers.is_empty() {
                channels.watchers.remove(&self.channel);
                channels
                    .idle_since
                    .insert(self.channel.clone(), Instant::now());
            }
        }
    }
}

fn run(shared: Weak<Shared>, pool: Arc<Pool>, nudged: Receiver<()>) {
    let mut backoff = Duration::from_millis(10);
    loop {
        let Some(current) = shared.upgrade() else {
            return;
        };
        if current.stop.load(Ordering::Acquire) {
            return;
        }
        if current.channels.lock().watchers.is_empty() {
            drop(current);
            // Nothing to watch: sleep until a watcher (or the end) arrives.
            if nudged.recv().is_err() {
                return;
            }
            continue;
        }
        match serve(&current, &pool, &nudged) {
            Ok(()) => backoff = Duration::from_millis(10),
            Err(error) => {
                log::warn!("lock pub/sub connection lost ({error}); reconnecting");
                lost_connection(&current);
                drop(current);
                let _ = nudged.recv_timeout(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Everyone subscribed may have missed a message: forget the subscriptions and wake every watcher
/// so that it looks at its lock itself.
fn lost_connection(shared: &Shared) {
    let mut channels = shared.channels.lock();
    channels.subscribed.clear();
    channels.idle_since.clear();
    channels
        .watchers
        .values()
        .flatten()
        .for_each(|signal| signal.fire());
}

/// Serves one connection until nothing has been watched for [`KEEP_IDLE`] (`Ok`) or the
/// connection fails (`Err`).
fn serve(shared: &Shared, pool: &Pool, nudged: &Receiver<()>) -> redis::RedisResult<()> {
    let mut con = pool
        .redis_client()
        .get_connection_with_timeout(pool.connect_timeout())?;
    let mut pubsub = con.as_pubsub();
    pubsub.set_read_timeout(Some(POLL))?;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        let (wanted, unwanted) = {
            let channels = shared.channels.lock();
            if channels.watchers.is_empty() && channels.subscribed.is_empty() {
                drop(channels);
                // Idle: Redis sends nothing on a connection without subscriptions.
                match nudged.recv_timeout(KEEP_IDLE) {
                    Ok(()) => continue,
                    Err(_) => return Ok(()),
                }
            }
            let wanted: Vec<String> = channels
                .watchers
                .keys()
                .filter(|channel| !channels.subscribed.contains(*channel))
                .cloned()
                .collect();
            let unwanted: Vec<String> = channels
                .subscribed
                .iter()
                .filter(|channel| {
                    channels
                        .idle_since
                        .get(*channel)
                        .is_some_and(|since| since.elapsed() >= KEEP_CHANNEL)
                })
                .cloned()
                .collect();
            (wanted, unwanted)
        };
        if !wanted.is_empty() {
            pubsub.subscribe(&wanted)?;
            let mut channels = shared.channels.lock();
            channels.subscribed.extend(wanted);
            shared.confirmed.notify_all();
        }
        if !unwanted.is_empty() {
            pubsub.unsubscribe(&unwanted)?;
            let mut channels = shared.channels.lock();
            for channel in &unwanted {
                // Watched again meanwhile: subscribe it again on the next turn.
                channels.subscribed.remove(channel);
                channels.idle_since.remove(channel);
            }
        }
        match pubsub.get_message() {
            Ok(message) => {
                let channel = message.get_channel_name();
                if let Some(watchers) = shared.channels.lock().watchers.get(channel) {
                    watchers.iter().for_each(|signal| signal.fire());
                }
            }
            Err(error) if error.is_timeout() => {}
            Err(error) => return Err(error),
        }
    }
}

//! Waking waiters: a registry of the lock channels this client's threads wait on, and, for a
//! backend that announces releases, subscriber threads that subscribe every watched channel: one
//! per server (one for a single server, one per master of a cluster, where channels are sharded
//! and subscribed on the master that owns their slot). A "freed" message wakes the watchers of
//! that lock; so does a release by a thread of this client ([`Waiters::notify`]), at once. A lost
//! connection is re-opened, its channels subscribed again, and their watchers woken to look for
//! themselves, since a message may have been lost meanwhile; so are the watchers of a channel
//! whose slot moved to another master, which subscribes it there.
//!
//! While any channel is subscribed a subscriber polls its connection with a short deadline and
//! applies new subscriptions between polls; it sends nothing on those timeouts. With nothing
//! subscribed it sleeps until a watcher arrives.

use crate::conn::Conn;
use crate::pool::Pool;
use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use redis::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

/// How long a subscriber waits for a message before looking for new subscriptions.
const POLL: Duration = Duration::from_millis(5);
/// The longest pause between attempts to reconnect.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long an idle connection (nothing watched) is kept open for the next waiter.
const KEEP_IDLE: Duration = Duration::from_secs(30);
/// How long a channel stays subscribed after its last watcher left, so that a lock waited for
/// again and again is not subscribed anew each time.
const KEEP_CHANNEL: Duration = Duration::from_secs(1);

/// Where a backend announces releases: which server carries a channel, and how it is subscribed.
pub(crate) trait Announcer: Send + Sync + 'static {
    /// The server that carries `channel` now: a name for it, and its pool.
    fn server_of(&self, channel: &str) -> Option<(String, Arc<Pool>)>;
    /// Sharded channels (`SSUBSCRIBE` on the channel's master) or global ones (`SUBSCRIBE`).
    fn sharded(&self) -> bool;
}

/// One server's announcer: every channel on it, global.
struct OneServer(Arc<Pool>);

impl Announcer for OneServer {
    fn server_of(&self, _: &str) -> Option<(String, Arc<Pool>)> {
        Some((String::new(), Arc::clone(&self.0)))
    }
    fn sharded(&self) -> bool {
        false
    }
}

/// A flag a waiter sleeps on.
#[derive(Default)]
struct Signal {
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
    /// Channels subscribed now (confirmed by the server), and on which server.
    subscribed: HashMap<String, String>,
    /// Subscribed channels nobody watches, since when.
    idle_since: HashMap<String, Instant>,
}

impl Channels {
    fn fire(&self, channel: &str) {
        if let Some(watchers) = self.watchers.get(channel) {
            watchers.iter().for_each(|signal| signal.fire());
        }
    }
}

struct Shared {
    channels: Mutex<Channels>,
    /// Signalled whenever `subscribed` changes.
    confirmed: Condvar,
    announcer: Option<Arc<dyn Announcer>>,
    /// The subscriber threads, by server, each with what nudges it.
    subscribers: Mutex<HashMap<String, Sender<()>>>,
    thread_name: String,
    stop: AtomicBool,
}

impl Shared {
    /// Nudges the subscriber of `server`, starting it first if there is none.
    fn nudge(self: &Arc<Self>, server: &str, pool: &Arc<Pool>) {
        let mut subscribers = self.subscribers.lock();
        if let Some(nudge) = subscribers.get(server) {
            let _ = nudge.try_send(());
            return;
        }
        let (nudge, nudged) = crossbeam_channel::bounded(1);
        let weak = Arc::downgrade(self);
        let (name, pool) = (server.to_owned(), Arc::clone(pool));
        let started = thread::Builder::new()
            .name(self.thread_name.clone())
            .spawn(move || run(weak, name, pool, nudged));
        match started {
            Ok(_) => {
                let _ = nudge.try_send(());
                subscribers.insert(server.to_owned(), nudge);
            }
            // The waiters still wake on releases of this client and on re-checks.
            Err(error) => log::warn!("no subscriber thread for {server:?}: {error}"),
        }
    }

    /// The server a channel is carried by now.
    fn route(&self, channel: &str) -> Option<(String, Arc<Pool>)> {
        self.announcer.as_ref()?.server_of(channel)
    }
}

/// The waiters of one client, and its subscriber threads if it has any.
pub(crate) struct Waiters {
    shared: Arc<Shared>,
}

impl Waiters {
    fn new(announcer: Option<Arc<dyn Announcer>>, thread_name: String) -> Waiters {
        Waiters {
            shared: Arc::new(Shared {
                channels: Mutex::new(Channels::default()),
                confirmed: Condvar::new(),
                announcer,
                subscribers: Mutex::new(HashMap::new()),
                thread_name,
                stop: AtomicBool::new(false),
            }),
        }
    }

    /// Waiters woken only by this client's own releases (a backend without announcements).
    pub(crate) fn local() -> Waiters {
        Waiters::new(None, String::new())
    }

    /// Waiters also woken by one server's announcements, through a subscriber thread named
    /// `thread_name` that connects through `pool` when a channel is first watched.
    pub(crate) fn subscribed(pool: Arc<Pool>, thread_name: String) -> std::io::Result<Waiters> {
        Ok(Waiters::new(Some(Arc::new(OneServer(pool))), thread_name))
    }

    /// Waiters also woken by the announcements of the servers `announcer` names, through one
    /// subscriber thread per server.
    pub(crate) fn announced(announcer: Arc<dyn Announcer>, thread_name: String) -> Waiters {
        Waiters::new(Some(announcer), thread_name)
    }

    /// Starts watching `channel`; with a subscriber, waits (until `confirm_by` at the latest)
    /// for the subscription to be in place, so that a message published after this returns is
    /// seen.
    pub(crate) fn watch(&self, channel: &str, confirm_by: Instant) -> Watch {
        let signal = Arc::new(Signal::default());
        let route = self.shared.route(channel);
        let mut channels = self.shared.channels.lock();
        channels.idle_since.remove(channel);
        channels
            .watchers
            .entry(channel.to_owned())
            .or_default()
            .push(Arc::clone(&signal));
        if let Some((server, pool)) = &route {
            if channels.subscribed.get(channel) != Some(server) {
                drop(channels);
                self.shared.nudge(server, pool);
                channels = self.shared.channels.lock();
            }
            while channels.subscribed.get(channel) != Some(server) {
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
        }
        Watch {
            shared: Arc::clone(&self.shared),
            channel: channel.to_owned(),
            signal,
        }
    }

    /// Wakes this client's watchers of `channel` at once: a thread of this client freed the lock
    /// (or changed it so that they should look).
    pub(crate) fn notify(&self, channel: &str) {
        self.shared.channels.lock().fire(channel);
    }
}

impl Drop for Waiters {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for nudge in self.shared.subscribers.lock().values() {
            let _ = nudge.try_send(());
        }
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

/// The subscriber of one server: serves its connection while anything routed to it is watched,
/// reconnecting with backoff when the connection fails.
fn run(shared: Weak<Shared>, server: String, pool: Arc<Pool>, nudged: Receiver<()>) {
    let mut backoff = Duration::from_millis(10);
    loop {
        let Some(current) = shared.upgrade() else {
            return;
        };
        if current.stop.load(Ordering::Acquire) {
            return;
        }
        if !has_work(&current, &server) {
            drop(current);
            // Nothing to watch here: sleep until a watcher (or the end) arrives.
            if nudged.recv().is_err() {
                return;
            }
            continue;
        }
        match serve(&current, &server, &pool, &nudged) {
            Ok(()) => backoff = Duration::from_millis(10),
            Err(error) => {
                log::warn!("lock pub/sub connection lost ({error}); reconnecting");
                lost_connection(&current, &server);
                drop(current);
                let _ = nudged.recv_timeout(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Whether anything watched is routed to `server`, or subscribed on it.
fn has_work(shared: &Shared, server: &str) -> bool {
    let channels = shared.channels.lock();
    channels.subscribed.values().any(|on| on == server)
        || channels
            .watchers
            .keys()
            .any(|channel| shared.route(channel).is_some_and(|(to, _)| to == server))
}

/// The channels of `server` may have missed a message: forget them and wake their watchers so
/// that they look at their locks themselves.
fn lost_connection(shared: &Shared, server: &str) {
    let mut channels = shared.channels.lock();
    let lost: Vec<String> = channels
        .subscribed
        .iter()
        .filter(|(_, on)| *on == server)
        .map(|(channel, _)| channel.clone())
        .collect();
    for channel in &lost {
        channels.subscribed.remove(channel);
        channels.idle_since.remove(channel);
        channels.fire(channel);
    }
    // Watchers not yet subscribed anywhere look too.
    let unsubscribed: Vec<String> = channels
        .watchers
        .keys()
        .filter(|channel| !channels.subscribed.contains_key(*channel))
        .cloned()
        .collect();
    unsubscribed
        .iter()
        .for_each(|channel| channels.fire(channel));
}

fn command(name: &str, channels: &[String], sharded: bool) -> Vec<u8> {
    if sharded {
        // Sharded channels of different slots may not share one command.
        channels
            .iter()
            .flat_map(|channel| redis::cmd(name).arg(channel).get_packed_command())
            .collect()
    } else {
        redis::cmd(name).arg(channels).get_packed_command()
    }
}

/// Serves one connection until nothing has been routed to it for [`KEEP_IDLE`] (`Ok`) or the
/// connection fails (`Err`).
fn serve(
    shared: &Arc<Shared>,
    server: &str,
    pool: &Pool,
    nudged: &Receiver<()>,
) -> redis::RedisResult<()> {
    let sharded = shared
        .announcer
        .as_ref()
        .is_some_and(|announcer| announcer.sharded());
    let (subscribe, unsubscribe) = if sharded {
        ("SSUBSCRIBE", "SUNSUBSCRIBE")
    } else {
        ("SUBSCRIBE", "UNSUBSCRIBE")
    };
    let mut conn = pool
        .open(Instant::now() + pool.command_timeout())
        .map_err(|error| crate::conn::io_error(std::io::ErrorKind::Other, error.to_string()))?;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if !pool.is_current(&conn) {
            // The Sentinels named another primary: subscribe there.
            return Err(crate::conn::io_error(
                std::io::ErrorKind::NotConnected,
                "the primary changed",
            ));
        }
        let mut elsewhere: Vec<(String, Arc<Pool>)> = Vec::new();
        let (wanted, unwanted) = {
            let mut channels = shared.channels.lock();
            let mine = channels.subscribed.values().any(|on| on == server);
            let mut routed_here = false;
            let mut wanted = Vec::new();
            for channel in channels.watchers.keys() {
                match shared.route(channel) {
                    Some((to, _)) if to == server => {
                        routed_here = true;
                        if channels.subscribed.get(channel).map(String::as_str) != Some(server) {
                            wanted.push(channel.clone());
                        }
                    }
                    Some(route) if channels.subscribed.get(channel) != Some(&route.0) => {
                        elsewhere.push(route);
                    }
                    _ => {}
                }
            }
            if !mine && !routed_here {
                drop(channels);
                for (other, other_pool) in elsewhere.drain(..) {
                    shared.nudge(&other, &other_pool);
                }
                // Idle: Redis sends nothing on a connection without subscriptions.
                match nudged.recv_timeout(KEEP_IDLE) {
                    Ok(()) => continue,
                    Err(_) => return Ok(()),
                }
            }
            // Channels idle for a while, and channels whose slot moved to another server.
            let unwanted: Vec<String> = channels
                .subscribed
                .iter()
                .filter(|(_, on)| *on == server)
                .filter(|(channel, _)| {
                    let idle = channels
                        .idle_since
                        .get(*channel)
                        .is_some_and(|since| since.elapsed() >= KEEP_CHANNEL);
                    let moved = shared.route(channel).is_some_and(|(to, _)| to != server);
                    idle || moved
                })
                .map(|(channel, _)| channel.clone())
                .collect();
            for channel in &unwanted {
                // Watched again later: subscribed again (here or elsewhere) on a later turn.
                channels.subscribed.remove(channel);
                channels.idle_since.remove(channel);
                channels.fire(channel);
            }
            (wanted, unwanted)
        };
        for (other, other_pool) in elsewhere {
            shared.nudge(&other, &other_pool);
        }
        conn.set_deadline(Instant::now() + pool.command_timeout());
        if !wanted.is_empty() {
            conn.send(&command(subscribe, &wanted, sharded))?;
        }
        if !unwanted.is_empty() {
            conn.send(&command(unsubscribe, &unwanted, sharded))?;
        }
        receive(shared, server, &mut conn, &wanted)?;
    }
}

/// Reads what the server sends for a while: messages wake their watchers, confirmations mark
/// channels subscribed, and a channel the server unsubscribed by itself (its slot moved) wakes its
/// watchers. Until every channel in `confirming` is confirmed, keeps reading (by the command
/// timeout); otherwise polls for [`POLL`].
fn receive(
    shared: &Shared,
    server: &str,
    conn: &mut Conn,
    confirming: &[String],
) -> redis::RedisResult<()> {
    let mut unconfirmed: HashSet<&str> = confirming.iter().map(String::as_str).collect();
    if unconfirmed.is_empty() {
        conn.set_deadline(Instant::now() + POLL);
    }
    loop {
        let Some(value) = conn.poll()? else {
            if !unconfirmed.is_empty() {
                return Err(crate::conn::io_error(
                    std::io::ErrorKind::TimedOut,
                    "SUBSCRIBE was not confirmed within the command timeout",
                ));
            }
            return Ok(());
        };
        let parts = match value {
            Value::Array(parts) | Value::Push { data: parts, .. } => parts,
            Value::ServerError(error) => {
                // A refused subscription (the slot is not here any more): look again later.
                log::debug!("a subscription was refused: {error:?}");
                return Err(crate::conn::io_error(
                    std::io::ErrorKind::Other,
                    format!("subscription refused: {error:?}"),
                ));
            }
            _ => continue,
        };
        let text = |index: usize| match parts.get(index) {
            Some(Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
            _ => String::new(),
        };
        match text(0).as_str() {
            "message" | "smessage" => shared.channels.lock().fire(&text(1)),
            "subscribe" | "ssubscribe" => {
                let channel = text(1);
                unconfirmed.remove(channel.as_str());
                shared
                    .channels
                    .lock()
                    .subscribed
                    .insert(channel, server.to_owned());
                shared.confirmed.notify_all();
                if unconfirmed.is_empty() && !confirming.is_empty() {
                    return Ok(());
                }
            }
            "sunsubscribe" => {
                // Sent by the server when the channel's slot moved away, or in answer to ours.
                let channel = text(1);
                let mut channels = shared.channels.lock();
                if channels.subscribed.get(&channel).map(String::as_str) == Some(server) {
                    channels.subscribed.remove(&channel);
                    channels.fire(&channel);
                }
            }
            _ => {}
        }
    }
}

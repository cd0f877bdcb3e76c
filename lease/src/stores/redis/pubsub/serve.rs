//! The subscriber threads, one per server: each serves its connection while anything routed to
//! it is watched, subscribes and unsubscribes channels between polls, wakes watchers on what the
//! server sends, and reconnects with backoff when the connection fails.

use super::Subscriptions;
use crate::stores::redis::conn::Conn;
use crate::stores::redis::pool::Pool;
use crossbeam_channel::Receiver;
use redis::Value;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
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

impl Subscriptions {
    /// Nudges the subscriber of `server`, starting it first if there is none.
    pub(super) fn nudge(self: &Arc<Self>, server: &str, pool: &Arc<Pool>) {
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
}

/// The subscriber of one server: serves its connection while anything routed to it is watched,
/// reconnecting with backoff when the connection fails.
fn run(shared: Weak<Subscriptions>, server: String, pool: Arc<Pool>, nudged: Receiver<()>) {
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
fn has_work(shared: &Subscriptions, server: &str) -> bool {
    let channels = shared.channels.lock();
    channels.subscribed.values().any(|on| on == server)
        || channels
            .watched
            .keys()
            .any(|channel| shared.route(channel).is_some_and(|(to, _)| to == server))
}

/// The channels of `server` may have missed a message: forget them and wake their watchers so
/// that they look at their locks themselves.
fn lost_connection(shared: &Subscriptions, server: &str) {
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
        shared.notifier.notify(channel);
    }
    // Watchers not yet subscribed anywhere look too.
    let unsubscribed: Vec<String> = channels
        .watched
        .keys()
        .filter(|channel| !channels.subscribed.contains_key(*channel))
        .cloned()
        .collect();
    unsubscribed
        .iter()
        .for_each(|channel| shared.notifier.notify(channel));
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
    shared: &Arc<Subscriptions>,
    server: &str,
    pool: &Pool,
    nudged: &Receiver<()>,
) -> redis::RedisResult<()> {
    let sharded = shared.announcer.sharded();
    let (subscribe, unsubscribe) = if sharded {
        ("SSUBSCRIBE", "SUNSUBSCRIBE")
    } else {
        ("SUBSCRIBE", "UNSUBSCRIBE")
    };
    let mut conn = pool
        .open(Instant::now() + pool.command_timeout())
        .map_err(|error| {
            crate::stores::redis::conn::io_error(std::io::ErrorKind::Other, error.to_string())
        })?;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if !pool.is_current(&conn) {
            // The Sentinels named another primary: subscribe there.
            return Err(crate::stores::redis::conn::io_error(
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
            for channel in channels.watched.keys() {
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
                shared.notifier.notify(channel);
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
    shared: &Subscriptions,
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
                return Err(crate::stores::redis::conn::io_error(
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
                return Err(crate::stores::redis::conn::io_error(
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
            "message" | "smessage" => shared.notifier.notify(&text(1)),
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
                    shared.notifier.notify(&channel);
                }
            }
            _ => {}
        }
    }
}

//! Listens to the Sentinels' `+switch-master` announcements, so that a client drops its
//! connections to an old primary as soon as a failover is announced, rather than when a call on
//! them fails: an old primary cut off from the Sentinels but not from the client would otherwise
//! keep answering as a primary.
//!
//! Every Sentinel is listened to, each by a thread of its own: the Sentinel that led a failover
//! announces it at once, the others only once they hear of it (Sentinels gossip every 2 s), and
//! a client listening to one of those would go on using the old primary meanwhile. An
//! announcement is checked with the Sentinel that made it ([`failover_announced`]), so that a
//! Sentinel catching up late on an older failover moves nothing. A thread leaves a Sentinel
//! that stops answering its `PING` and subscribes to it again once it answers; each time it
//! subscribes, it asks the Sentinel which primary it names ([`failover_missed`]), since a
//! failover announced while nobody listened (a client cut off from the Sentinels) would
//! otherwise go unheard until the old primary is converted. All end once the client is dropped.

use super::discovery::Sentinels;
use crate::stores::redis::conn::{Conn, Endpoint};
use crate::stores::redis::pool::Pool;
use redis::Value;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The Sentinels' channel for a failover that has completed.
const CHANNEL: &str = "+switch-master";
/// How long one read waits for a message; the thread also looks whether its client is gone.
const POLL: Duration = Duration::from_millis(500);
/// The pause before subscribing again after an error.
const AGAIN: Duration = Duration::from_secs(1);
/// How long the subscription may stay quiet before the Sentinel is asked whether it is there:
/// a Sentinel that stopped answering (frozen, cut off) would otherwise be listened to for ever.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Starts a listener on each of `sentinels`, for the connections of `pool`, named `thread_name`
/// and the Sentinel's place in the list.
pub(crate) fn watch(
    pool: &Arc<Pool>,
    sentinels: &Arc<Sentinels>,
    thread_name: &str,
) -> std::io::Result<()> {
    for (index, sentinel) in sentinels.endpoints().iter().enumerate() {
        let sentinel = sentinel.clone();
        let sentinels = Arc::clone(sentinels);
        let pool = Arc::downgrade(pool);
        std::thread::Builder::new()
            .name(format!("{thread_name}-{index}"))
            .spawn(move || listen(&pool, &sentinels, &sentinel))?;
    }
    Ok(())
}

/// Takes in that `sentinel` announced a failover: every connection of `pool` is dropped at once,
/// and from the moment the Sentinel says which primary it named, no connection is opened to an
/// older one.
fn failover_announced(pool: &Pool, sentinels: &Sentinels, sentinel: &Endpoint) {
    pool.forget_connections();
    sentinels.announced(sentinel, pool.call_deadline());
}

/// Asks `sentinel`, listened to again after a while without it (a partition, a restart),
/// which primary it names: a failover it announced meanwhile was not heard. If that primary is
/// newer than the one `pool`'s connections reach, they are all dropped, and no connection is
/// opened to an older one from then on.
fn failover_missed(pool: &Pool, sentinels: &Sentinels, sentinel: &Endpoint) {
    if sentinels.announced(sentinel, pool.call_deadline()) {
        log::info!(
            "sentinel {} names a newer primary than this client's connections reach",
            sentinel.shown()
        );
        pool.forget_connections();
    }
}

fn listen(pool: &Weak<Pool>, sentinels: &Sentinels, sentinel: &Endpoint) {
    loop {
        let Some(timeout) = pool.upgrade().map(|pool| pool.command_timeout()) else {
            return;
        };
        match subscribe(sentinel, timeout) {
            Ok(mut conn) => {
                // Subscribed: nothing announced from now on is missed, but something announced
                // before may have been.
                match pool.upgrade() {
                    Some(pool) => failover_missed(&pool, sentinels, sentinel),
                    None => return,
                }
                if let Err(error) = follow(&mut conn, pool, sentinels, sentinel, timeout) {
                    log::debug!("sentinel {}: {error}", sentinel.shown());
                }
            }
            Err(error) => log::debug!("sentinel {}: {error}", sentinel.shown()),
        }
        if pool.strong_count() == 0 {
            return;
        }
        std::thread::sleep(AGAIN);
    }
}

fn subscribe(sentinel: &Endpoint, timeout: Duration) -> redis::RedisResult<Conn> {
    let deadline = Instant::now() + timeout;
    let mut conn = Conn::open(sentinel, deadline)?;
    conn.send(&redis::cmd("SUBSCRIBE").arg(CHANNEL).get_packed_command())?;
    conn.receive()?.extract_error()?;
    Ok(conn)
}

/// Reads announcements until the connection fails, the Sentinel leaves a `PING` unanswered for
/// `timeout`, or the pool is gone; an announcement for the Sentinels' master is taken in.
fn follow(
    conn: &mut Conn,
    pool: &Weak<Pool>,
    sentinels: &Sentinels,
    sentinel: &Endpoint,
    timeout: Duration,
) -> redis::RedisResult<()> {
    let master = sentinels.master();
    let mut heard_at = Instant::now();
    let mut pinged_at: Option<Instant> = None;
    loop {
        conn.set_deadline(Instant::now() + POLL);
        let message = conn.poll()?;
        let Some(pool) = pool.upgrade() else {
            return Ok(());
        };
        let now = Instant::now();
        if let Some(message) = &message {
            // Anything read (a `pong` too) shows the Sentinel is there.
            heard_at = now;
            pinged_at = None;
            if let Some(text) = payload(message) {
                if text.split(' ').next() == Some(master) {
                    log::info!(
                        "sentinel {} announced a new primary: {text}",
                        sentinel.shown()
                    );
                    failover_announced(&pool, sentinels, sentinel);
                }
            }
        }
        match pinged_at {
            Some(at) if now.saturating_duration_since(at) >= timeout => {
                return Err(crate::stores::redis::conn::io_error(
                    std::io::ErrorKind::TimedOut,
                    "the sentinel stopped answering",
                ));
            }
            None if now.saturating_duration_since(heard_at) >= HEARTBEAT => {
                // The poll's deadline has passed: the write needs one of its own.
                conn.set_deadline(now + timeout);
                conn.send(&redis::cmd("PING").get_packed_command())?;
                pinged_at = Some(now);
            }
            _ => {}
        }
    }
}

/// The text of a pub/sub message (`message`, channel, payload).
fn payload(value: &Value) -> Option<String> {
    let items = match value {
        Value::Array(items) | Value::Push { data: items, .. } => items,
        _ => return None,
    };
    match items.as_slice() {
        [Value::BulkString(kind), _, Value::BulkString(text)] if kind.as_slice() == b"message" => {
            Some(String::from_utf8_lossy(text).into_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_messages_carry_a_payload() {
        let bulk = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        let message = Value::Array(vec![
            bulk("message"),
            bulk(CHANNEL),
            bulk("m 127.0.0.1 1 127.0.0.1 2"),
        ]);
        assert_eq!(
            payload(&message).as_deref(),
            Some("m 127.0.0.1 1 127.0.0.1 2")
        );
        let confirmation = Value::Array(vec![bulk("subscribe"), bulk(CHANNEL), Value::Int(1)]);
        assert_eq!(payload(&confirmation), None);
    }
}

//! Listens to the Sentinels' `+switch-master` announcements, so that a client drops its
//! connections to an old primary as soon as a failover is announced, rather than when a call on
//! them fails: an old primary cut off from the Sentinels but not from the client would otherwise
//! keep answering as a primary.
//!
//! One thread per client of a Sentinel deployment, subscribed on one Sentinel at a time (the
//! next in the list after an error, or once it stops answering a `PING`), which ends once the
//! client is dropped.

use crate::conn::{Conn, Endpoint};
use crate::pool::Pool;
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

/// Starts the listener for `pool`'s Sentinels, if it has any.
pub(crate) fn watch(pool: &Arc<Pool>, thread_name: String) -> std::io::Result<()> {
    let Some(sentinels) = pool.sentinels() else {
        return Ok(());
    };
    let endpoints = sentinels.endpoints().to_vec();
    let master = sentinels.master().to_owned();
    let pool = Arc::downgrade(pool);
    std::thread::Builder::new()
        .name(thread_name)
        .spawn(move || listen(&pool, &endpoints, &master))
        .map(drop)
}

fn listen(pool: &Weak<Pool>, sentinels: &[Endpoint], master: &str) {
    for sentinel in sentinels.iter().cycle() {
        let Some(timeout) = pool.upgrade().map(|pool| pool.command_timeout()) else {
            return;
        };
        match subscribe(sentinel, timeout) {
            Ok(mut conn) => {
                if let Err(error) = follow(&mut conn, pool, master, timeout) {
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
/// `timeout`, or the pool is gone; an announcement for `master` makes the pool forget its
/// connections.
fn follow(
    conn: &mut Conn,
    pool: &Weak<Pool>,
    master: &str,
    timeout: Duration,
) -> redis::RedisResult<()> {
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
                    log::info!("sentinels announced a new primary: {text}");
                    pool.forget_connections();
                }
            }
        }
        match pinged_at {
            Some(at) if now.saturating_duration_since(at) >= timeout => {
                return Err(crate::conn::io_error(
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

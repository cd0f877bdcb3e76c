//! The primitives a store keeps apart from the lock of the same name, which the lock's view of
//! a name never shows: a count-down latch and a rate limiter. How `lease status` finds a name to
//! be one, and how it shows it in words and in JSON and with which exit code: each kind in one
//! place here, so that another is added as one more case.

use crate::exit;
use crate::human;
use redis_lease::{Client, LatchState, LimiterState, RateLimit};
use std::time::Duration;

/// A primitive kept apart from the lock, as the store holds it now.
pub enum Apart {
    /// A count-down latch that is set (counting down, or at zero and not lapsed yet).
    Latch(LatchState),
    /// A rate limiter with a limit stored (grants that still count, or a recent reconfigure).
    Limiter(LimiterState),
}

/// What the name is apart from its lock, if it is anything: the first kind, in the order of
/// [`Apart`], that the store holds. A kind the store does not offer (a latch or a rate limiter
/// on RedLock, a rate limiter on ZooKeeper) is passed over.
pub fn found(client: &Client, name: &str) -> redis_lease::Result<Option<Apart>> {
    if let Ok(latch) = client.latch(name) {
        let state = latch.inspect()?;
        if state.exists {
            return Ok(Some(Apart::Latch(state)));
        }
    }
    // Any limit will do to look: the state read gives the one stored, if any.
    if let Ok(limiter) = client.rate_limiter(name, 1, Duration::from_secs(1)) {
        let state = limiter.inspect()?;
        if state.limit.is_some() {
            return Ok(Some(Apart::Limiter(state)));
        }
    }
    Ok(None)
}

impl Apart {
    /// One sentence: `"nightly/loaded": latch, count 2, lapses in 23h59m`.
    pub fn describe(&self) -> String {
        match self {
            Apart::Latch(state) => {
                let count = match state.count {
                    0 => "at zero (open)".to_owned(),
                    count => format!("count {count}"),
                };
                let lapses = state.ttl.map_or_else(
                    || ", lapse time not told by the store".to_owned(),
                    |ttl| format!(", lapses in {}", human::duration(ttl)),
                );
                format!("{:?}: latch, {count}{lapses}", state.name)
            }
            Apart::Limiter(state) => {
                let node = state
                    .node
                    .as_ref()
                    .map_or_else(String::new, |node| format!(" (on {node})"));
                let limit = state.limit.as_ref().map_or_else(String::new, limit_text);
                let next = state.next_in.map_or_else(String::new, |next| {
                    format!(", next grant in {}", human::duration(next))
                });
                format!(
                    "{:?}{node}: rate limiter, {limit}, {} granted that count now, {} available{next}",
                    state.name, state.used, state.available
                )
            }
        }
    }

    /// The same facts as one JSON object, its `kind` the primitive's.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Apart::Latch(state) => serde_json::json!({
                "name": state.name,
                "kind": "latch",
                "exists": state.exists,
                "count": state.count,
                "ttl_ms": state.ttl.map(millis),
            }),
            Apart::Limiter(state) => {
                let limit = state.limit.as_ref().map(limit_json);
                serde_json::json!({
                    "name": state.name,
                    "kind": "rate limiter",
                    "node": state.node,
                    "limit": limit,
                    "used": state.used,
                    "available": state.available,
                    "next_in_ms": state.next_in.map(millis),
                    "now_ms": state.now.duration_since(std::time::UNIX_EPOCH).ok().map(millis),
                })
            }
        }
    }

    /// The exit code of `lease status`, as for a lock (0 held, 1 free): 0 while the primitive
    /// holds its waiters back (a latch that counts down, a limiter with no grant available), 1
    /// when it lets them through.
    pub fn code(&self) -> u8 {
        let closed = match self {
            Apart::Latch(state) => state.count > 0,
            Apart::Limiter(state) => state.available == 0,
        };
        if closed {
            0
        } else {
            exit::FREE
        }
    }
}

/// `10 per 1m window`, `5 per 1s, burst 2`.
fn limit_text(limit: &RateLimit) -> String {
    match limit {
        RateLimit::Window { limit, window } => {
            format!("{limit} per {} window", human::duration(*window))
        }
        RateLimit::CellRate {
            rate,
            period,
            burst,
        } => format!("{rate} per {}, burst {burst}", human::duration(*period)),
    }
}

fn limit_json(limit: &RateLimit) -> serde_json::Value {
    match limit {
        RateLimit::Window { limit, window } => serde_json::json!({
            "mode": "window", "limit": limit, "window_ms": millis(*window),
        }),
        RateLimit::CellRate {
            rate,
            period,
            burst,
        } => serde_json::json!({
            "mode": "cell rate", "rate": rate, "period_ms": millis(*period), "burst": burst,
        }),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

//! A service that must run once across many hosts: it campaigns for the election `scheduler`,
//! and while it leads, writes its work to a store that refuses any write fenced by an older term
//! than one it has seen; it steps down after a few rounds, or at once if its leadership is lost.
//!
//! ```sh
//! redis-server --port 6379 &
//! cargo run -p redis-lease --example leader -- redis://127.0.0.1:6379 host-a &
//! cargo run -p redis-lease --example leader -- redis://127.0.0.1:6379 host-b
//! ```
//!
//! Run two of them: one leads while the other waits and follows, then they change places.
#![allow(clippy::print_stdout)] // an example that says what it does

use redis_lease::{Client, Leadership};
use std::error::Error;
use std::time::Duration;

/// The store's side of fencing: a write is applied only if its term is at least the highest
/// term the store has seen. Here the store is a Redis key; a database does the same with a
/// `WHERE term <= $1` on the row it updates.
const FENCED_WRITE: &str = "
local seen = tonumber(redis.call('hget', KEYS[1], 'term') or '0')
if tonumber(ARGV[1]) < seen then return 0 end
redis.call('hset', KEYS[1], 'term', ARGV[1], 'by', ARGV[2], 'round', ARGV[3])
return 1";

/// Campaigns, leads a few rounds, and steps down: `leader [URL] [NAME]`.
pub fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let me = args.next().unwrap_or_else(|| "host".into());
    let client = Client::builder(url.as_str())
        .default_lease(Duration::from_secs(3))
        .build()?;
    let mut store = redis::Client::open(url.as_str())?.get_connection()?;
    let election = client.election("scheduler")?;

    let observer = election.observe()?;
    if let Some(leader) = observer.leader() {
        println!(
            "{me}: {} leads (term {}), waiting",
            leader.value, leader.term
        );
    }
    let mut leadership = election.campaign(me.as_str())?;
    println!("{me}: leading with term {}", leadership.term());
    lead(&mut leadership, &mut store, &me)?;
    leadership.resign()?;
    println!("{me}: stepped down");
    Ok(())
}

/// A few rounds of work, each written fenced by the term, while the leadership lasts.
fn lead(
    leadership: &mut Leadership,
    store: &mut redis::Connection,
    me: &str,
) -> Result<(), Box<dyn Error>> {
    let lost = leadership.lost_signal();
    for round in 1..=5 {
        let accepted: i64 = redis::Script::new(FENCED_WRITE)
            .key("scheduler:state")
            .arg(leadership.term())
            .arg(me)
            .arg(round)
            .invoke(store)?;
        if accepted == 0 {
            println!(
                "{me}: the store refused term {}: a newer leader wrote",
                leadership.term()
            );
            return Ok(());
        }
        leadership.proclaim(format!("{me} (round {round})"))?;
        if lost.recv_timeout(Duration::from_secs(1)).is_ok() {
            println!("{me}: leadership lost; stopping at once");
            return Ok(());
        }
    }
    Ok(())
}

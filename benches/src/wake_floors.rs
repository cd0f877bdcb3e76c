//! The floors of a hand-off to a waiter woken by pub/sub, with raw commands and no lock library:
//! how fast the next holder can learn that it holds, for each way the news could reach it. A
//! holder thread takes a key with `SET`, keeps it for a while, stamps and releases it with a Lua
//! script; a waiter, on connections of its own, stamps when it knows it holds the key. The two
//! stamps' difference is one sample.
//!
//! - `grant, read by the waiter`: the release sets the key to the waiter's value itself and
//!   publishes it; the waiting thread reads its own subscription and holds on the message.
//! - `grant, read by a subscriber thread`: the same, but a subscriber thread reads the message
//!   and wakes the waiting thread through a channel (one thread hop).
//! - `freed, acquire by the reader`: the release deletes the key and publishes `freed`; the thread
//!   reading the subscription takes the key with `SET NX` at once.
//! - `freed, subscriber wakes the waiter`: the same with a subscriber thread that wakes a waiting
//!   thread, which sends the `SET NX` (the shape of a client whose threads share a subscriber).

use crate::lock_peers::set_nx_px;
use std::sync::mpsc::{sync_channel as bounded, Receiver, SyncSender as Sender};
use std::thread;
use std::time::{Duration, Instant};

/// The ways the news of a release can reach the next holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The release grants the key in Redis; the waiting thread reads the message.
    GrantReadByWaiter,
    /// The release grants the key; a subscriber thread reads the message and wakes the waiter.
    GrantThroughSubscriber,
    /// The release frees the key; the reading thread takes it with `SET NX`.
    FreedAcquireByReader,
    /// The release frees the key; a subscriber thread wakes the waiter, which takes it.
    FreedThroughSubscriber,
}

impl Wake {
    /// Every way, in the order the table prints them.
    pub const ALL: [Wake; 4] = [
        Wake::GrantReadByWaiter,
        Wake::GrantThroughSubscriber,
        Wake::FreedAcquireByReader,
        Wake::FreedThroughSubscriber,
    ];

    /// The row's name.
    pub fn name(self) -> &'static str {
        match self {
            Wake::GrantReadByWaiter => "grant, read by the waiter",
            Wake::GrantThroughSubscriber => "grant, read by a subscriber thread",
            Wake::FreedAcquireByReader => "freed, acquire by the reader",
            Wake::FreedThroughSubscriber => "freed, subscriber wakes the waiter",
        }
    }

    fn grants(self) -> bool {
        matches!(self, Wake::GrantReadByWaiter | Wake::GrantThroughSubscriber)
    }

    fn hops(self) -> bool {
        matches!(
            self,
            Wake::GrantThroughSubscriber | Wake::FreedThroughSubscriber
        )
    }
}

/// Deletes the key if it holds ARGV[1]; then sets it to ARGV[2] and publishes that value if
/// ARGV[2] is not empty (a grant), or publishes `freed`.
const RELEASE: &str = "\
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
if ARGV[2] ~= '' then
  redis.call('set', KEYS[1], ARGV[2], 'px', 30000)
  redis.call('publish', KEYS[2], ARGV[2])
else
  redis.call('publish', KEYS[2], 'freed')
end
return 1";

const KEY: &str = "wake-floor";
const CHANNEL: &str = "wake-floor:channel";
const WAITER: &str = "waiter";

/// `rounds` hand-offs the given way on the server at `url`, the holder keeping the key `hold`
/// each time. The samples in ms, in round order.
pub fn samples(url: &str, wake: Wake, rounds: usize, hold: Duration) -> Vec<f64> {
    let client = redis::Client::open(url).expect("a valid URL");
    let mut holder = client.get_connection().expect("connect");
    let release = redis::Script::new(RELEASE);
    let (armed_tx, armed) = bounded::<()>(1);
    let (go_tx, go) = bounded::<()>(1);
    let (held_tx, held) = bounded::<Instant>(1);
    let waiter = {
        let client = client.clone();
        thread::spawn(move || waiter_side(&client, wake, &go, &armed_tx, &held_tx))
    };
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let () = redis::cmd("SET")
            .arg(KEY)
            .arg("holder")
            .query(&mut holder)
            .expect("SET");
        go_tx.send(()).expect("waiter alive");
        armed
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiter armed");
        thread::sleep(hold);
        let granted = if wake.grants() { WAITER } else { "" };
        let released = Instant::now();
        let _: i64 = release
            .key(KEY)
            .key(CHANNEL)
            .arg("holder")
            .arg(granted)
            .invoke(&mut holder)
            .expect("release");
        let at = held
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiter held");
        samples.push(at.saturating_duration_since(released).as_secs_f64() * 1e3);
    }
    drop(go_tx);
    waiter.join().expect("no panic");
    samples
}

/// The waiter: subscribed for good; each round says it is armed, learns it holds the key the
/// given way, stamps, deletes the key and reports the stamp.
fn waiter_side(
    client: &redis::Client,
    wake: Wake,
    go: &Receiver<()>,
    armed: &Sender<()>,
    held: &Sender<Instant>,
) {
    let mut own = client.get_connection().expect("connect");
    let mut subscribed = client.get_connection().expect("connect");
    let (news_tx, news) = bounded::<String>(1);
    let mut subscriber = None;
    // The reading thread's subscription lasts across rounds (dropping it unsubscribes).
    let mut reader = None;
    if wake.hops() {
        let (ready_tx, ready) = bounded::<()>(1);
        subscriber = Some(thread::spawn(move || {
            let mut pubsub = subscribed.as_pubsub();
            pubsub.subscribe(CHANNEL).expect("SUBSCRIBE");
            ready_tx.send(()).expect("waiter alive");
            while let Ok(message) = pubsub.get_message() {
                let payload: String = message.get_payload().expect("a string");
                if news_tx.send(payload).is_err() {
                    return;
                }
            }
        }));
        ready.recv().expect("subscribed");
    } else {
        let mut pubsub = subscribed.as_pubsub();
        pubsub.subscribe(CHANNEL).expect("SUBSCRIBE");
        reader = Some(pubsub);
    }
    while go.recv().is_ok() {
        armed.send(()).expect("holder alive");
        loop {
            let payload = match reader.as_mut() {
                Some(pubsub) => pubsub
                    .get_message()
                    .expect("a message")
                    .get_payload::<String>()
                    .expect("a string"),
                None => news.recv().expect("subscriber alive"),
            };
            if payload == WAITER || set_nx_px(&mut own, KEY, WAITER, 30_000) {
                break;
            }
        }
        let at = Instant::now();
        // Freed before the holder hears of it, so that its next round's SET comes after.
        let _: i64 = redis::cmd("DEL").arg(KEY).query(&mut own).expect("DEL");
        held.send(at).expect("holder alive");
    }
    drop(news);
    if let Some(thread) = subscriber {
        // The subscriber ends when its next send fails; a last message unblocks it.
        let _: i64 = redis::cmd("PUBLISH")
            .arg(CHANNEL)
            .arg("end")
            .query(&mut own)
            .expect("PUBLISH");
        thread.join().expect("no panic");
    }
}

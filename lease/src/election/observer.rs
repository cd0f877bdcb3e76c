//! [`Observer`]: a thread that follows an election's leader and reports each change on a
//! channel, woken by the store rather than polling it.

use super::leader::Leader;
use super::seen::Seen;
use crate::backend::Leading;
use crate::cancel::Cancel;
use crate::error::Result;
use crate::lock::Lock;
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest an observer goes without reading the election when nothing wakes it: a
/// backstop, for an announcement lost without its connection breaking.
const LOOK_BACKSTOP: Duration = Duration::from_secs(5);

/// How long after a lease's end an observer reads again, for it to have lapsed in the store.
const LAPSE_MARGIN: Duration = Duration::from_millis(2);

/// How long an observer whose read failed waits before reading again.
const RETRY: Duration = Duration::from_millis(200);

/// Follows an election's leader, from [`Election::observe`](crate::Election::observe): its
/// [`changes`](Observer::changes) channel carries the leader at the start, then each change
/// (`Some`: a new term, or a new value proclaimed within a term; `None`: no leader), never a
/// term older than one it carried, nor a term again once it carried its end. A thread of its
/// own reads the election when the store announces a change (a proclamation, a resignation;
/// ZooKeeper's watches: a node gone or changed), when the leader's lease would lapse (Redis,
/// where a lapse is not announced), and at least every 5 s. It stops when the observer is
/// dropped.
///
/// An observer reports what the store held when it read it: a leader that lost its lease a
/// moment ago may still be reported until the next read. A follower that must know who leads
/// *now* compares terms at the resource, as fencing does.
///
/// ```no_run
/// # fn main() -> redis_lease::Result<()> {
/// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
/// let observer = client.election("scheduler")?.observe()?;
/// for leader in observer.changes().iter().take(3) {
///     match leader {
///         Some(leader) => println!("term {}: {}", leader.term, leader.value),
///         None => println!("no leader"),
///     }
/// }
/// # Ok(())
/// # }
/// ```
pub struct Observer {
    changes: Receiver<Option<Leader>>,
    latest: Arc<Mutex<Option<Leader>>>,
    stop: Cancel,
}

impl Observer {
    /// Reads the election once, then starts the thread that follows it.
    pub(super) fn start(lock: Lock) -> Result<Observer> {
        let core = lock.core();
        let key = lock.place().wake_key().to_owned();
        // Watched before the first read: no change after it goes unannounced.
        let watch = core.waiters().watch(&key, core.call_deadline());
        let first = lock.elects()?.leader(true, core.call_deadline())?;
        let next_look = next_look(&first, Instant::now());
        let mut seen = Seen::default();
        let (tell, changes) = crossbeam_channel::unbounded();
        let first = seen.read(first).unwrap_or(None);
        // Unbounded, and its receiver alive: the send cannot fail.
        let _ = tell.send(first.clone());
        let latest = Arc::new(Mutex::new(first));
        let stop = Cancel::new();
        let follow = Follow {
            lock,
            seen,
            tell,
            latest: Arc::clone(&latest),
            stop: stop.clone(),
        };
        std::thread::Builder::new()
            .name("lease-observer".into())
            .spawn(move || follow.run(watch, next_look))
            .map_err(|error| {
                crate::error::Error::InvalidArgument(format!("no thread for an observer: {error}"))
            })?;
        Ok(Observer {
            changes,
            latest,
            stop,
        })
    }

    /// The leader at the start, then each change, in order.
    pub fn changes(&self) -> &Receiver<Option<Leader>> {
        &self.changes
    }

    /// The leader this observer last read (the last message of [`Observer::changes`], whether
    /// received yet or not).
    pub fn leader(&self) -> Option<Leader> {
        self.latest.lock().clone()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("leader", &self.leader())
            .finish_non_exhaustive()
    }
}

/// When to read again if nothing wakes the observer: just after the leader's lease would end
/// (where the store tells it), and within [`LOOK_BACKSTOP`].
fn next_look(read: &Option<Leading>, now: Instant) -> Instant {
    let ttl = read.as_ref().and_then(|leading| leading.ttl);
    now + ttl.map_or(LOOK_BACKSTOP, |ttl| (ttl + LAPSE_MARGIN).min(LOOK_BACKSTOP))
}

/// The observer's thread.
struct Follow {
    lock: Lock,
    seen: Seen,
    tell: Sender<Option<Leader>>,
    latest: Arc<Mutex<Option<Leader>>>,
    stop: Cancel,
}

impl Follow {
    fn run(mut self, watch: crate::waiters::Watch, mut look_at: Instant) {
        loop {
            watch.wait_or_cancel(look_at, Some(&self.stop));
            if self.stop.is_cancelled() {
                return;
            }
            let core = self.lock.core();
            let read = match self
                .lock
                .elects()
                .and_then(|elects| elects.leader(true, core.call_deadline()))
            {
                Ok(read) => read,
                Err(error) => {
                    log::debug!(
                        "observing the election {:?}: {error}; reading again",
                        self.lock.name()
                    );
                    look_at = Instant::now() + RETRY;
                    continue;
                }
            };
            look_at = next_look(&read, Instant::now());
            if let Some(change) = self.seen.read(read) {
                self.latest.lock().clone_from(&change);
                if self.tell.send(change).is_err() {
                    return;
                }
            }
        }
    }
}

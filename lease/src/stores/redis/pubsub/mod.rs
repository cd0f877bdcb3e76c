//! Redis's announcements of freed locks: a [`Subscriber`] that keeps every channel some waiter
//! watches subscribed, with one thread per server (one for a single server, one per master of a
//! cluster, where channels are sharded and subscribed on the master that owns their slot). A
//! "freed" message wakes the watchers of that lock, through the client's waiter registry
//! (`waiters.rs`), which knows nothing of Redis. A lost connection is re-opened, its channels
//! subscribed again, and their watchers woken to look for themselves, since a message may have
//! been lost meanwhile; so are the watchers of a channel whose slot moved to another master,
//! which subscribes it there.
//!
//! While any channel is subscribed a subscriber polls its connection with a short deadline and
//! applies new subscriptions between polls; it sends nothing on those timeouts. With nothing
//! subscribed it sleeps until a watcher arrives.

mod serve;

use crate::stores::redis::pool::Pool;
use crate::waiters::{Announcements, Notifier};
use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Where a deployment announces releases: which server carries a channel, and how it is
/// subscribed.
pub(crate) trait Announcer: Send + Sync + 'static {
    /// The server that carries `channel` now: a name for it, and its pool.
    fn server_of(&self, channel: &str) -> Option<(String, Arc<Pool>)>;
    /// Sharded channels (`SSUBSCRIBE` on the channel's master) or global ones (`SUBSCRIBE`).
    fn sharded(&self) -> bool;
}

/// One server's announcer: every channel on it, global.
pub(crate) struct OneServer(pub(crate) Arc<Pool>);

impl Announcer for OneServer {
    fn server_of(&self, _: &str) -> Option<(String, Arc<Pool>)> {
        Some((String::new(), Arc::clone(&self.0)))
    }
    fn sharded(&self) -> bool {
        false
    }
}

/// The channels the subscriber threads keep.
#[derive(Default)]
struct Channels {
    /// Channels some waiter watches, with how many watch each.
    watched: HashMap<String, usize>,
    /// Channels subscribed now (confirmed by the server), and on which server.
    subscribed: HashMap<String, String>,
    /// Subscribed channels nobody watches, since when.
    idle_since: HashMap<String, Instant>,
}

struct Subscriptions {
    channels: Mutex<Channels>,
    /// Signalled whenever `subscribed` changes.
    confirmed: Condvar,
    announcer: Arc<dyn Announcer>,
    /// Wakes the watchers of a channel.
    notifier: Notifier,
    /// The subscriber threads, by server, each with what nudges it.
    subscribers: Mutex<HashMap<String, Sender<()>>>,
    thread_name: String,
    stop: AtomicBool,
}

impl Subscriptions {
    /// The server a channel is carried by now.
    fn route(&self, channel: &str) -> Option<(String, Arc<Pool>)> {
        self.announcer.server_of(channel)
    }
}

/// The subscriber of one client: started threads stop when it is dropped.
pub(crate) struct Subscriber {
    shared: Arc<Subscriptions>,
}

impl Subscriber {
    /// A subscriber to what `announcer` routes, whose threads are named `thread_name` and wake
    /// waiters through `notifier`; it starts a thread for a server when a channel on it is
    /// first watched.
    pub(crate) fn new(
        announcer: Arc<dyn Announcer>,
        thread_name: String,
        notifier: Notifier,
    ) -> Subscriber {
        Subscriber {
            shared: Arc::new(Subscriptions {
                channels: Mutex::new(Channels::default()),
                confirmed: Condvar::new(),
                announcer,
                notifier,
                subscribers: Mutex::new(HashMap::new()),
                thread_name,
                stop: AtomicBool::new(false),
            }),
        }
    }
}

impl Announcements for Subscriber {
    fn watch(&self, channel: &str, confirm_by: Instant) {
        let route = self.shared.route(channel);
        let mut channels = self.shared.channels.lock();
        channels.idle_since.remove(channel);
        *channels.watched.entry(channel.to_owned()).or_default() += 1;
        let Some((server, pool)) = &route else {
            return;
        };
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

    fn unwatch(&self, channel: &str) {
        let mut channels = self.shared.channels.lock();
        let Some(count) = channels.watched.get_mut(channel) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            channels.watched.remove(channel);
            channels
                .idle_since
                .insert(channel.to_owned(), Instant::now());
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for nudge in self.shared.subscribers.lock().values() {
            let _ = nudge.try_send(());
        }
    }
}

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

mod serve;

use crate::stores::redis::pool::Pool;
use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

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

    /// A handle that wakes this client's watchers from another thread (a backend's own event
    /// thread).
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub(crate) fn notifier(&self) -> Notifier {
        Notifier(Arc::clone(&self.shared))
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

/// Wakes a client's watchers of a channel, from any thread.
#[derive(Clone)]
pub(crate) struct Notifier(Arc<Shared>);

impl Notifier {
    /// As [`Waiters::notify`].
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub(crate) fn notify(&self, channel: &str) {
        self.0.channels.lock().fire(channel);
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
    /// consumed: the next call waits for the next one. Woken as well when `cancel` (if any) is
    /// cancelled.
    pub(crate) fn wait_or_cancel(&self, until: Instant, cancel: Option<&crate::Cancel>) -> bool {
        let _registration = cancel.map(|cancel| {
            let signal = Arc::clone(&self.signal);
            cancel.on_cancel(Arc::new(move || signal.fire()))
        });
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

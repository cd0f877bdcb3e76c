//! Waking waiters, in no store's terms: a registry of the threads of one client that sleep until
//! a lock they wait for may have come free, each lock known by its wake key (its place's
//! [`wake_key`](crate::backend::Place::wake_key)). A release by a thread of this client wakes
//! them at once ([`Waiters::notify`]); so does the store, through [`Announcements`] (Redis's
//! pub/sub) or a [`Notifier`] its own event thread holds (ZooKeeper's watches).

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// A store's announcements of freed locks, as a subscriber of its own keeps them: told each
/// time a waiter starts or stops watching a key, it wakes the key's watchers (through the
/// [`Notifier`] it was made with) when the store says the lock may be free.
pub(crate) trait Announcements: Send + Sync + 'static {
    /// A waiter starts watching `key`: arrange for its announcements to wake it, and return
    /// once a message published from now on would (or at `confirm_by`, the waiter then relying
    /// on its re-checks).
    fn watch(&self, key: &str, confirm_by: Instant);

    /// A waiter of `key` stopped watching it (one call per [`Announcements::watch`]).
    fn unwatch(&self, key: &str);
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

/// The watchers of each wake key.
#[derive(Default)]
struct Registry {
    watchers: Mutex<HashMap<String, Vec<Arc<Signal>>>>,
}

impl Registry {
    fn fire(&self, key: &str) {
        if let Some(watchers) = self.watchers.lock().get(key) {
            watchers.iter().for_each(|signal| signal.fire());
        }
    }
}

/// The waiters of one client, and the store's announcements if it has any.
pub(crate) struct Waiters {
    registry: Arc<Registry>,
    announcements: Option<Arc<dyn Announcements>>,
}

impl Waiters {
    /// Waiters woken only by this client's own releases, and by whoever holds a
    /// [`Waiters::notifier`].
    pub(crate) fn local() -> Waiters {
        Waiters {
            registry: Arc::default(),
            announcements: None,
        }
    }

    /// Waiters also woken by the announcements `make` sets up, given the notifier they wake
    /// waiters with.
    pub(crate) fn announced(make: impl FnOnce(Notifier) -> Arc<dyn Announcements>) -> Waiters {
        let registry = Arc::<Registry>::default();
        let announcements = make(Notifier(Arc::clone(&registry)));
        Waiters {
            registry,
            announcements: Some(announcements),
        }
    }

    /// A handle that wakes this client's watchers from another thread (a store's own event
    /// thread).
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub(crate) fn notifier(&self) -> Notifier {
        Notifier(Arc::clone(&self.registry))
    }

    /// Starts watching `key`; with announcements, waits (until `confirm_by` at the latest) until
    /// a message published after this returns would be seen.
    pub(crate) fn watch(&self, key: &str, confirm_by: Instant) -> Watch {
        let signal = Arc::new(Signal::default());
        self.registry
            .watchers
            .lock()
            .entry(key.to_owned())
            .or_default()
            .push(Arc::clone(&signal));
        if let Some(announcements) = &self.announcements {
            announcements.watch(key, confirm_by);
        }
        Watch {
            registry: Arc::clone(&self.registry),
            announcements: self.announcements.clone(),
            key: key.to_owned(),
            signal,
        }
    }

    /// Wakes this client's watchers of `key` at once: a thread of this client freed the lock (or
    /// changed it so that they should look).
    pub(crate) fn notify(&self, key: &str) {
        self.registry.fire(key);
    }
}

/// Wakes a client's watchers of a key, from any thread.
#[derive(Clone)]
pub(crate) struct Notifier(Arc<Registry>);

impl Notifier {
    /// As [`Waiters::notify`].
    pub(crate) fn notify(&self, key: &str) {
        self.0.fire(key);
    }

    /// Wakes the watchers of every key: the store lost track (a connection or a session
    /// broke), and each should look for itself.
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub(crate) fn notify_all(&self) {
        for watchers in self.0.watchers.lock().values() {
            watchers.iter().for_each(|signal| signal.fire());
        }
    }
}

/// A waiter's registration on one key; unregisters on drop.
pub(crate) struct Watch {
    registry: Arc<Registry>,
    announcements: Option<Arc<dyn Announcements>>,
    key: String,
    signal: Arc<Signal>,
}

impl Watch {
    /// Sleeps until the key fires or `until` passes. Returns whether it fired. The signal is
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
        {
            let mut watchers = self.registry.watchers.lock();
            if let Some(signals) = watchers.get_mut(&self.key) {
                signals.retain(|signal| !Arc::ptr_eq(signal, &self.signal));
                if signals.is_empty() {
                    watchers.remove(&self.key);
                }
            }
        }
        if let Some(announcements) = &self.announcements {
            announcements.unwatch(&self.key);
        }
    }
}

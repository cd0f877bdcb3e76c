//! [`Cancel`]: a token that ends blocking waits from another thread.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Instant;

/// Ends the waits of the locks it is given to, from any thread: a lock set up with
/// [`Lock::cancel_on`](crate::Lock::cancel_on) (a semaphore, a read-write lock's sides the same)
/// returns [`Error::Cancelled`](crate::Error::Cancelled) from a waiting call soon after
/// [`Cancel::cancel`], within one command timeout (an attempt under way is let finish, and a
/// hold it made is given back). One token may serve many waits; once cancelled it stays
/// cancelled. Cheap to clone: clones share the token.
///
/// ```
/// let cancel = redis_lease::Cancel::new();
/// let stopper = cancel.clone();
/// std::thread::spawn(move || stopper.cancel());
/// // lock.cancel_on(&cancel).lock() returns Err(Error::Cancelled { .. }) once it fires.
/// # cancel.cancel();
/// assert!(cancel.is_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct Cancel(Arc<Token>);

/// Wakes one sleeping wait.
type Waker = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Token {
    state: Mutex<TokenState>,
    rung: Condvar,
}

#[derive(Default)]
struct TokenState {
    cancelled: bool,
    next: u64,
    wakers: Vec<(u64, Waker)>,
}

impl Cancel {
    /// A token not cancelled yet.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Ends every wait given this token, now and later.
    pub fn cancel(&self) {
        let wakers = {
            let mut state = self.0.state.lock();
            state.cancelled = true;
            std::mem::take(&mut state.wakers)
        };
        self.0.rung.notify_all();
        for (_, wake) in wakers {
            wake();
        }
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.state.lock().cancelled
    }

    /// Calls `wake` when the token is cancelled (at once if it is), until the registration is
    /// dropped.
    pub(crate) fn on_cancel(&self, wake: Waker) -> Registration<'_> {
        let mut state = self.0.state.lock();
        if state.cancelled {
            drop(state);
            wake();
            return Registration {
                cancel: self,
                id: None,
            };
        }
        state.next += 1;
        let id = state.next;
        state.wakers.push((id, wake));
        Registration {
            cancel: self,
            id: Some(id),
        }
    }

    /// Sleeps until `until` or until the token is cancelled.
    pub(crate) fn sleep_until(&self, until: Instant) {
        let mut state = self.0.state.lock();
        while !state.cancelled {
            if self.0.rung.wait_until(&mut state, until).timed_out() {
                break;
            }
        }
    }
}

/// Sleeps until `until`, or until `cancel` (if any) is cancelled.
pub(crate) fn sleep_until(cancel: Option<&Cancel>, until: Instant) {
    match cancel {
        Some(cancel) => cancel.sleep_until(until),
        None => std::thread::sleep(until.saturating_duration_since(Instant::now())),
    }
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// A waker registered with a token; unregistered on drop.
pub(crate) struct Registration<'a> {
    cancel: &'a Cancel,
    id: Option<u64>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.cancel
                .0
                .state
                .lock()
                .wakers
                .retain(|(waker, _)| *waker != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn cancelling_wakes_registered_waits_and_later_ones_at_once() {
        let cancel = Cancel::new();
        let woken = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&woken);
        let registration = cancel.on_cancel(Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        let dropped = cancel.on_cancel(Arc::new(|| panic!("unregistered")));
        drop(dropped);
        cancel.clone().cancel();
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        drop(registration);
        let counter = Arc::clone(&woken);
        let _late = cancel.on_cancel(Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(woken.load(Ordering::SeqCst), 2, "a late waker runs at once");
        // A cancelled token does not sleep.
        let started = Instant::now();
        cancel.sleep_until(started + Duration::from_secs(60));
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}

//! [`Guard`]: what every hold offers, so that code can take a lock's guard, a `MultiLock`'s or
//! an election's leadership alike.

use crate::error::Result;
use crate::lost::{Lost, LostSignal};
use std::time::Instant;

/// What a hold offers, whichever primitive made it: a [`LeaseGuard`](crate::LeaseGuard) (a lock,
/// a semaphore's permits, a side of a read-write lock), a [`MultiGuard`](crate::MultiGuard) or a
/// [`Leadership`](crate::Leadership). The inherent methods of each say more.
///
/// ```no_run
/// use redis_lease::Guard;
///
/// /// Writes while the hold lasts, whichever lock guards it.
/// fn write_while_held(guard: impl Guard) -> redis_lease::Result<()> {
///     for _step in 0..10 {
///         if guard.is_lost() {
///             return Ok(()); // another owner may hold it now
///         }
///         // ... one step of work ...
///     }
///     guard.unlock()
/// }
/// # let client = redis_lease::Client::open("redis://127.0.0.1:6379")?;
/// # write_while_held(client.lock("a")?.lock()?)?;
/// # Ok::<(), redis_lease::Error>(())
/// ```
pub trait Guard {
    /// Whether the hold can no longer be trusted (lost, or past its local deadline).
    fn is_lost(&self) -> bool;

    /// Why the hold was lost, if it was.
    fn lost(&self) -> Option<Lost>;

    /// Until when the hold is known valid, on the watchdog's clock.
    fn valid_until(&self) -> Instant;

    /// A receiver told when the hold is lost.
    fn lost_signal(&self) -> LostSignal;

    /// Calls `told` once when the hold is lost, on the watchdog's thread (at once if it is lost
    /// already); dropped uncalled if the hold ends without being lost.
    fn on_lost(&self, told: impl FnOnce(Lost) + Send + 'static)
    where
        Self: Sized;

    /// Releases the hold (a leadership resigns) and reports the outcome.
    ///
    /// # Errors
    ///
    /// As the guard's own `unlock`.
    fn unlock(self) -> Result<()>
    where
        Self: Sized;
}

impl Guard for crate::LeaseGuard {
    fn is_lost(&self) -> bool {
        crate::LeaseGuard::is_lost(self)
    }

    fn lost(&self) -> Option<Lost> {
        crate::LeaseGuard::lost(self)
    }

    fn valid_until(&self) -> Instant {
        crate::LeaseGuard::valid_until(self)
    }

    fn lost_signal(&self) -> LostSignal {
        crate::LeaseGuard::lost_signal(self)
    }

    fn on_lost(&self, told: impl FnOnce(Lost) + Send + 'static) {
        crate::LeaseGuard::on_lost(self, told);
    }

    fn unlock(self) -> Result<()> {
        crate::LeaseGuard::unlock(self)
    }
}

impl Guard for crate::MultiGuard {
    fn is_lost(&self) -> bool {
        crate::MultiGuard::is_lost(self)
    }

    fn lost(&self) -> Option<Lost> {
        crate::MultiGuard::lost(self)
    }

    fn valid_until(&self) -> Instant {
        crate::MultiGuard::valid_until(self)
    }

    fn lost_signal(&self) -> LostSignal {
        crate::MultiGuard::lost_signal(self)
    }

    fn on_lost(&self, told: impl FnOnce(Lost) + Send + 'static) {
        crate::MultiGuard::on_lost(self, told);
    }

    fn unlock(self) -> Result<()> {
        crate::MultiGuard::unlock(self)
    }
}

impl Guard for crate::Leadership {
    fn is_lost(&self) -> bool {
        crate::Leadership::is_lost(self)
    }

    fn lost(&self) -> Option<Lost> {
        crate::Leadership::lost(self)
    }

    fn valid_until(&self) -> Instant {
        crate::Leadership::valid_until(self)
    }

    fn lost_signal(&self) -> LostSignal {
        crate::Leadership::lost_signal(self)
    }

    fn on_lost(&self, told: impl FnOnce(Lost) + Send + 'static) {
        crate::Leadership::on_lost(self, told);
    }

    /// Resigns once: a resignation that fails is not sent again on drop (the term ends when its
    /// lease lapses), as a guard's failed unlock is not.
    fn unlock(self) -> Result<()> {
        let mut leadership = self;
        let resigned = leadership.resign();
        if resigned.is_err() {
            leadership.abandon();
        }
        resigned
    }
}

//! The locks, condition variables, atomics and threads the timer is built of: the shards' own
//! lock (below), `parking_lot`'s and the standard library's, or, in a build with
//! `RUSTFLAGS="--cfg shuttle"`, the same API over `shuttle`'s, so that the checker controls every
//! interleaving of the worker and the threads that schedule and cancel (the checks are this
//! crate's `interleavings` tests, and the watchdog's in `redis-lease`). `shuttle` never times a wait out, so a timed wait here lets the other threads
//! run and then, by the checker's choice, says its deadline passed or returns as a spurious
//! wake-up would. Nothing here is used outside a check in that build.

#[cfg(not(shuttle))]
pub(crate) use parking_lot::{Condvar, Mutex};
#[cfg(not(shuttle))]
pub(crate) use spinning::ShardMutex;
#[cfg(not(shuttle))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64};
#[cfg(not(shuttle))]
pub(crate) use std::thread::{current, Builder, ThreadId};

#[cfg(shuttle)]
pub(crate) use checked::{Condvar, Mutex, Mutex as ShardMutex};
#[cfg(shuttle)]
pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicU64};
#[cfg(shuttle)]
pub(crate) use shuttle::thread::{current, Builder, ThreadId};

/// The lock of a shard: `spin`'s lock, taken with one atomic read-modify-write and released with
/// a plain store, against two read-modify-writes for `parking_lot`'s, whose release must look for
/// sleeping waiters (4 to 5 ns of a schedule's 42 and of a cancel's 17 on one thread,
/// `docs/benchmarks.md`). A shard's lock is held for a few dozen nanoseconds (a schedule, a
/// cancel) or for one batch of the worker's (at most `BATCH` tasks taken out), and each thread
/// schedules on a shard of its own while there are as many shards as threads. A thread that finds
/// it held spins a little, yields its core a few times, then naps 20 µs at a time until it is
/// free: `spin`'s own waiting either spins or yields without end, and burns a core while a
/// preempted holder waits for one. Written here for that waiting only.
#[cfg(not(shuttle))]
mod spinning {
    use spin::mutex::{SpinMutex, SpinMutexGuard};

    /// Spins before yielding: about as long as a schedule holds the lock.
    const SPINS: u32 = 64;
    /// Yields before napping.
    const YIELDS: u32 = 8;
    const NAP: std::time::Duration = std::time::Duration::from_micros(20);

    pub(crate) struct ShardMutex<T>(SpinMutex<T>);

    impl<T> ShardMutex<T> {
        pub(crate) fn new(value: T) -> Self {
            ShardMutex(SpinMutex::new(value))
        }

        #[inline]
        pub(crate) fn lock(&self) -> SpinMutexGuard<'_, T> {
            match self.0.try_lock() {
                Some(guard) => guard,
                None => self.lock_contended(),
            }
        }

        #[cold]
        fn lock_contended(&self) -> SpinMutexGuard<'_, T> {
            let mut tries = 0u32;
            loop {
                if !self.0.is_locked() {
                    if let Some(guard) = self.0.try_lock() {
                        return guard;
                    }
                }
                tries += 1;
                if tries < SPINS {
                    std::hint::spin_loop();
                } else if tries < SPINS + YIELDS {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(NAP);
                }
            }
        }
    }
}

/// The checked twins of `parking_lot`'s lock and condition variable, public (and hidden) in the
/// `shuttle` build only, so that `redis-lease`'s checks use them too.
#[cfg(shuttle)]
pub mod checked {
    use crate::checks::UNREACHED;
    use shuttle::rand::{thread_rng, RngCore};
    use std::ops::{Deref, DerefMut};
    use std::time::Instant;

    /// `parking_lot::Mutex`'s API over `shuttle`'s.
    #[derive(Default)]
    pub struct Mutex<T>(shuttle::sync::Mutex<T>);

    impl<T> Mutex<T> {
        /// An unlocked lock holding `value`.
        pub fn new(value: T) -> Mutex<T> {
            Mutex(shuttle::sync::Mutex::new(value))
        }

        /// Takes the lock, waiting for it as the checker schedules.
        pub fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: &self.0,
                guard: Some(self.0.lock().expect("never poisoned in a check")),
            }
        }

        /// Takes the lock if it is free now.
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            let guard = self.0.try_lock().ok()?;
            Some(MutexGuard {
                mutex: &self.0,
                guard: Some(guard),
            })
        }
    }

    /// A held [`Mutex`]; a wait releases and takes it again in place.
    pub struct MutexGuard<'a, T> {
        mutex: &'a shuttle::sync::Mutex<T>,
        guard: Option<shuttle::sync::MutexGuard<'a, T>>,
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.guard.as_ref().expect("held")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.guard.as_mut().expect("held")
        }
    }

    /// Whether a timed wait ended at its deadline.
    pub struct WaitTimeoutResult(bool);

    impl WaitTimeoutResult {
        /// Whether the wait ended at its deadline.
        pub fn timed_out(&self) -> bool {
            self.0
        }
    }

    /// `parking_lot::Condvar`'s API over `shuttle`'s.
    #[derive(Default)]
    pub struct Condvar(shuttle::sync::Condvar);

    impl Condvar {
        /// A condition variable nobody waits on.
        pub fn new() -> Condvar {
            Condvar(shuttle::sync::Condvar::new())
        }

        /// Wakes one waiter.
        pub fn notify_one(&self) {
            self.0.notify_one();
        }

        /// Wakes every waiter.
        pub fn notify_all(&self) {
            self.0.notify_all();
        }

        /// Releases the lock until notified, then takes it again.
        pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let held = guard.guard.take().expect("held");
            guard.guard = Some(self.0.wait(held).expect("never poisoned in a check"));
        }

        /// Releases the lock, lets the other threads run, takes it again, and says by the
        /// checker's choice whether the deadline passed. A deadline [`UNREACHED`] or more away
        /// stands for one no check reaches: it never passes.
        pub fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            deadline: Instant,
        ) -> WaitTimeoutResult {
            drop(guard.guard.take());
            shuttle::thread::yield_now();
            guard.guard = Some(guard.mutex.lock().expect("never poisoned in a check"));
            let reachable = deadline.saturating_duration_since(Instant::now()) < UNREACHED;
            WaitTimeoutResult(reachable && thread_rng().next_u32() & 1 == 1)
        }
    }
}

//! The lock and condition variable the local queue waits on: `parking_lot`'s, or, in the unit
//! tests built with `RUSTFLAGS="--cfg shuttle"`, the same API over `shuttle`'s, so that the
//! checker controls every interleaving of the queue's threads. `shuttle` never times a wait out,
//! so a timed wait here lets the other threads run and then, by the checker's choice, either
//! says its deadline passed or returns as a spurious wake-up would: a turn given just before,
//! at or after a waiter's deadline are all explored.

#[cfg(not(all(shuttle, test)))]
pub(crate) use parking_lot::{Condvar, Mutex};

#[cfg(all(shuttle, test))]
pub(crate) use checked::{Condvar, Mutex};

#[cfg(all(shuttle, test))]
mod checked {
    use shuttle::rand::{thread_rng, RngCore};
    use std::ops::{Deref, DerefMut};
    use std::time::Instant;

    /// `parking_lot::Mutex`'s API over `shuttle`'s.
    #[derive(Default)]
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(shuttle::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: &self.0,
                guard: Some(self.0.lock().expect("never poisoned in a check")),
            }
        }
    }

    /// A held [`Mutex`]; a wait releases and takes it again in place.
    pub(crate) struct MutexGuard<'a, T> {
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
    pub(crate) struct WaitTimeoutResult(bool);

    impl WaitTimeoutResult {
        pub(crate) fn timed_out(&self) -> bool {
            self.0
        }
    }

    /// `parking_lot::Condvar`'s API over `shuttle`'s.
    #[derive(Default)]
    pub(crate) struct Condvar(shuttle::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar(shuttle::sync::Condvar::new())
        }

        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let held = guard.guard.take().expect("held");
            guard.guard = Some(self.0.wait(held).expect("never poisoned in a check"));
        }

        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _deadline: Instant,
        ) -> WaitTimeoutResult {
            drop(guard.guard.take());
            shuttle::thread::yield_now();
            guard.guard = Some(guard.mutex.lock().expect("never poisoned in a check"));
            WaitTimeoutResult(thread_rng().next_u32() & 1 == 1)
        }
    }
}

//! The locks, condition variables, channels and threads that the local queue, the hand-off and
//! the watchdog wait on: `parking_lot`'s, `crossbeam-channel`'s and the standard library's, or,
//! in the unit tests built with `RUSTFLAGS="--cfg shuttle"`, the same API over `shuttle`'s (the
//! lock and condition variable are the timer's twins, `hashwheel::checked`), so that the checker
//! controls every interleaving of their threads. `shuttle` never times a wait out, so a timed
//! wait here lets the other threads run and then, by the checker's choice, either says its
//! deadline passed or returns as a spurious wake-up would: a turn given just before, at or after
//! a waiter's deadline are all explored.

#[cfg(not(all(shuttle, test)))]
pub(crate) use crossbeam_channel::{unbounded, Receiver, Sender};
#[cfg(not(all(shuttle, test)))]
pub(crate) use parking_lot::{Condvar, Mutex};
#[cfg(not(all(shuttle, test)))]
pub(crate) use std::thread::Builder;

#[cfg(all(shuttle, test))]
pub(crate) use hashwheel::checked::{Condvar, Mutex};
#[cfg(all(shuttle, test))]
pub(crate) use shuttle::sync::mpsc::{channel as unbounded, Receiver, Sender};
#[cfg(all(shuttle, test))]
pub(crate) use shuttle::thread::Builder;

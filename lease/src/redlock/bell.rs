//! Wakes this client's threads waiting for a RedLock when a thread of the same client releases
//! it, so that a local hand-off does not wait out a retry delay. A waiter starts listening
//! *before* its attempt, so a release between the attempt and the wait is not missed.

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::time::Instant;

#[derive(Default)]
pub(super) struct Bell {
    /// Per name with listeners: how often it rang, and how many listen.
    names: Mutex<HashMap<String, (u64, usize)>>,
    rang: Condvar,
}

/// A listener for one name; the bell may ring any time after this was made.
pub(super) struct Listening<'a> {
    bell: &'a Bell,
    name: String,
    rings: u64,
}

impl Bell {
    /// Rings for `name`: its listeners wake.
    pub(super) fn ring(&self, name: &str) {
        let mut names = self.names.lock();
        if let Some((rings, _)) = names.get_mut(name) {
            *rings += 1;
            self.rang.notify_all();
        }
    }

    /// Starts listening for `name`.
    pub(super) fn listen(&self, name: &str) -> Listening<'_> {
        let mut names = self.names.lock();
        let entry = names.entry(name.to_owned()).or_insert((0, 0));
        entry.1 += 1;
        Listening {
            bell: self,
            name: name.to_owned(),
            rings: entry.0,
        }
    }
}

impl Listening<'_> {
    /// Sleeps until the bell rang for the name since the last wait (or since listening began),
    /// or until `until` passes.
    pub(super) fn wait(&mut self, until: Instant) {
        let bell = self.bell;
        let mut names = bell.names.lock();
        loop {
            let rings = names
                .get(&self.name)
                .map_or(self.rings, |(rings, _)| *rings);
            if rings != self.rings {
                self.rings = rings;
                return;
            }
            if bell.rang.wait_until(&mut names, until).timed_out() {
                return;
            }
        }
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        let mut names = self.bell.names.lock();
        if let Some((_, listeners)) = names.get_mut(&self.name) {
            *listeners -= 1;
            if *listeners == 0 {
                names.remove(&self.name);
            }
        }
    }
}

//! Wakes this client's threads waiting for a RedLock when a thread of the same client releases
//! it, so that a local hand-off does not wait out a retry delay.

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::time::Instant;

#[derive(Default)]
pub(super) struct Bell {
    /// Per name with waiters: how often it rang, and how many wait.
    names: Mutex<HashMap<String, (u64, usize)>>,
    rang: Condvar,
}

impl Bell {
    /// Rings for `name`: its waiters wake.
    pub(super) fn ring(&self, name: &str) {
        let mut names = self.names.lock();
        if let Some((rings, _)) = names.get_mut(name) {
            *rings += 1;
            self.rang.notify_all();
        }
    }

    /// Sleeps until the bell rings for `name` or `until` passes.
    pub(super) fn wait(&self, name: &str, until: Instant) {
        let mut names = self.names.lock();
        let entry = names.entry(name.to_owned()).or_insert((0, 0));
        entry.1 += 1;
        let rung_at_start = entry.0;
        loop {
            if self.rang.wait_until(&mut names, until).timed_out() {
                break;
            }
            if names
                .get(name)
                .is_some_and(|(rings, _)| *rings != rung_at_start)
            {
                break;
            }
        }
        if let Some((_, waiters)) = names.get_mut(name) {
            *waiters -= 1;
            if *waiters == 0 {
                names.remove(name);
            }
        }
    }
}

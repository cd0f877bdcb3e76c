//! A count-down latch on Redis: a hash of its count and round, with its expiry as its TTL,
//! changed by the latch's scripts on the server its route reaches (acknowledged by replicas as
//! holds are), and announced on its channel when it reaches zero.

use super::KeysPlace;
use crate::backend::{LatchRead, Latches, LATCH_KEPT_OPEN};
use crate::error::Result;
use crate::stores::redis::on_server::acked_on;
use crate::stores::redis::scripts;
use std::time::{Duration, Instant};

impl Latches for KeysPlace {
    fn set_count(
        &self,
        count: u32,
        round: &str,
        expiry: Duration,
        deadline: Instant,
    ) -> Result<bool> {
        let keys = &self.keys;
        let call = scripts::latch_set(keys, count, round, expiry);
        self.route.call(&keys.lock, deadline, |via| {
            acked_on(via, keys, &call, scripts::parse_latch_set, deadline)
        })
    }

    fn count_down(&self, expiry: Duration, deadline: Instant) -> Result<u32> {
        let keys = &self.keys;
        let kept = expiry.max(LATCH_KEPT_OPEN);
        let call = scripts::latch_down(keys, expiry, kept, self.route.announce());
        self.route.call(&keys.lock, deadline, |via| {
            acked_on(via, keys, &call, scripts::parse_latch_down, deadline)
        })
    }

    /// Waiters are woken by the latch's channel, which its last count-down announces on.
    fn read(&self, _watch: bool, deadline: Instant) -> Result<LatchRead> {
        let keys = &self.keys;
        self.route.call(&keys.lock, deadline, |via| {
            via.call(deadline, |con| scripts::latch_read(con, keys))
        })
    }
}

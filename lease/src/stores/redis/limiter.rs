//! A rate limiter on Redis, on one server, a Sentinel's primary or a Cluster: its hash and its
//! log, both in the slot of its name, and each call one script (`scripts/limit_*.lua`) on the
//! server the route reaches, which reads `TIME`, judges and records in one step. Takes and
//! reconfigurations wait for the replica acknowledgements the client asks for, as holds do.

use crate::backend::{Limits, Taken};
use crate::error::Result;
use crate::rate::{self, LimiterState, RateLimit};
use crate::stores::redis::on_server::acked_on;
use crate::stores::redis::place::KeysPlace;
use crate::stores::redis::scripts::limit;
use std::time::Instant;

impl Limits for KeysPlace {
    fn take(&self, declared: &RateLimit, n: u64, deadline: Instant) -> Result<Taken> {
        let keys = &self.keys;
        let call = limit::take(keys, declared, n);
        self.route.call(&keys.lock, deadline, |via| {
            acked_on(via, keys, &call, limit::parse_take, deadline)
        })
    }

    fn reconfigure(&self, declared: &RateLimit, deadline: Instant) -> Result<Option<RateLimit>> {
        let keys = &self.keys;
        let call = limit::reconfigure(keys, declared);
        let before = self.route.call(&keys.lock, deadline, |via| {
            acked_on(via, keys, &call, limit::parse_reconfigure, deadline)
        })?;
        before.map_err(|stored| rate::other_mode(&keys.name, &stored, declared))
    }

    fn meter(&self, declared: &RateLimit, deadline: Instant) -> Result<LimiterState> {
        let keys = &self.keys;
        let call = limit::look(keys, declared);
        let (mut state, node) = self.route.named(&keys.lock, deadline, |via| {
            via.call(deadline, |con| {
                let reply = call.run(con, &keys.lock)?;
                limit::parse_look(&keys.name, &reply)
            })
        })?;
        state.node = Some(node.shown().to_owned());
        Ok(state)
    }
}

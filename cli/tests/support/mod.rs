//! Helpers shared by the tool's integration tests: a client of a test server, and waiting for work
//! on another thread to show.
#![allow(dead_code)]

use redis_lease::Client;
use std::time::Duration;

pub use testkit::RedisServer;

/// A client of `server` with short timeouts.
pub fn client(server: &RedisServer) -> Client {
    Client::builder(server.url())
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

/// Waits (up to 10 s) for work on another thread, such as a renewal call, to show.
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    testkit::wait_until(what, Duration::from_secs(10), done);
}

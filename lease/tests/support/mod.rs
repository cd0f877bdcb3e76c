//! Helpers shared by the integration tests.
#![allow(dead_code)]

use lease::Client;
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

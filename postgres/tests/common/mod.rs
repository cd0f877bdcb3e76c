//! What the tests share: deadlines and connections to the testkit's servers.
#![allow(dead_code)]

use postgres_blocking::{Config, Connection};
use std::time::{Duration, Instant};

/// A deadline far enough for any call to a healthy local server.
pub fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

/// A connection to `url`, which must succeed.
pub fn connect(url: &str) -> Connection {
    let config: Config = url.parse().expect("a valid URL");
    Connection::connect(&config, soon()).unwrap_or_else(|error| panic!("connect to {url}: {error}"))
}

/// Whether `shown` (an error's text or Debug) leaves out `password`.
pub fn hides(shown: &str, password: &str) -> bool {
    !shown.contains(password)
}

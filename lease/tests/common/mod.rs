//! What the integration tests share: clients of the servers they start (`testkit`), and the
//! checks every deployment runs (`election`, `held_write`, `latch`, `limiter`, `methods`,
//! `primitives`).
#![allow(dead_code)]

pub mod election;
pub mod held_write;
pub mod latch;
pub mod limiter;
pub mod methods;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod primitives;

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

/// A client with `lease` as its default lease, whose watchdog runs on a timer driven by a manual
/// clock: renewals and deadlines happen only when the test advances the clock.
pub fn manual_client(
    server: &RedisServer,
    lease: Duration,
) -> (
    Client,
    redis_lease::hashwheel::ManualClock,
    redis_lease::hashwheel::Timer,
) {
    let clock = redis_lease::hashwheel::ManualClock::new();
    let timer = redis_lease::hashwheel::Timer::builder()
        .clock(clock.clone())
        .build()
        .expect("valid timer settings");
    let client = Client::builder(server.url())
        .default_lease(lease)
        .connect_timeout(Duration::from_millis(500))
        .command_timeout(Duration::from_millis(500))
        .timer(timer.clone())
        .build()
        .expect("valid settings");
    (client, clock, timer)
}

/// A client on real time with `lease` as its default lease.
pub fn client_with_lease(server: &RedisServer, lease: Duration) -> Client {
    Client::builder(server.url())
        .default_lease(lease)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

/// Waits (up to 10 s) for work on another thread, such as a renewal call, to show.
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    testkit::wait_until(what, Duration::from_secs(10), done);
}

/// What `call` returns, called again while the deployment is unavailable (a failover in
/// progress) or its replicas do not acknowledge in time (a replica that has just synced gets the
/// primary's writes only after its first acknowledgement, up to a second later), failing the
/// test after `settle`.
pub fn retried_while_unavailable<T>(
    settle: Duration,
    mut call: impl FnMut() -> redis_lease::Result<T>,
) -> T {
    let deadline = std::time::Instant::now() + settle;
    loop {
        match call() {
            Ok(value) => return value,
            Err(
                redis_lease::Error::Unavailable { .. } | redis_lease::Error::NotReplicated { .. },
            ) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(error) => panic!("{error}"),
        }
    }
}

/// For a test that re-executes itself as an example it compiles in: runs the example's `main` if
/// this process is the example (`var` set in its environment), and gives its exit; `None` in the
/// test itself.
#[allow(clippy::print_stdout)] // the example's failure, where the test reads its output
pub fn as_example(
    var: &str,
    main: fn() -> Result<(), Box<dyn std::error::Error>>,
) -> Option<std::process::ExitCode> {
    std::env::var_os(var)?;
    Some(match main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            println!("example failed: {error}");
            std::process::ExitCode::FAILURE
        }
    })
}

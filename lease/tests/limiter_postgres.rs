//! The rate limiter on a real PostgreSQL (Debian's 15, started by the testkit): its calls, as
//! on Redis, judged by the database's clock; the store frozen and restarted.

mod common;

use common::limiter::a_limiter_works;
use common::postgres::server;
use redis_lease::Client;
use std::time::Duration;
use testkit::{PgServer, Shutdown};

/// A client of `server` as its password user, which may make the store's schema (see
/// [`server`]).
fn client(server: &PgServer) -> Client {
    Client::postgres(server.scram_url())
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

#[test]
fn a_limiter_works_on_postgres() {
    let server = server();
    a_limiter_works(&client(&server), "api");
}

#[test]
fn grants_survive_a_crash_of_the_server() {
    let mut server = server();
    let client = client(&server);
    let limiter = client
        .rate_limiter("kept", 3, Duration::from_secs(600))
        .expect("valid");
    limiter.try_acquire(3).expect("reachable").expect("free");
    server.stop(Shutdown::Immediate);
    server.start_again();
    let state = common::retried_while_unavailable(Duration::from_secs(30), || limiter.inspect());
    assert_eq!((state.used, state.available), (3, 0), "{state:?}");
    assert!(limiter.try_acquire(1).expect("reachable").is_none());
}

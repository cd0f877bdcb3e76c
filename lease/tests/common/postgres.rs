//! What the PostgreSQL tests share: a server whose password user may make the store's schema, and
//! clients of it.

use redis_lease::Client;
use std::time::Duration;
use testkit::PgServer;

/// A server whose password users may make the store's schema in its database.
pub fn server() -> PgServer {
    let server = PgServer::start();
    server.grant_schemas();
    server
}

/// A client of `url` whose default lease is `lease`, with short timeouts.
pub fn client_with(url: &str, lease: Duration) -> Client {
    Client::postgres(url)
        .default_lease(lease)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

//! The PostgreSQL deployment of a scenario: one server (testkit's `PgServer`, Debian's 15), with
//! PgBouncer in transaction mode in front of it when the clients' calls are pooled; the URLs the
//! clients get (the calls', and the listening connection's, either of which may go through the
//! suite's proxy); and what the faults ask of it: the owner of the lock's hold now, the server
//! frozen or restarted.
//!
//! The clients connect as the server's SCRAM user, which is granted the right to make the store's
//! schema (the first client to call makes it); the suite reads the store's tables as the
//! superuser.

use crate::proxy::Proxy;
use crate::LOCK_KEY;
use postgres_blocking::{Config, Connection};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use testkit::{PgBouncer, PgServer, Shutdown};

/// Server connections PgBouncer keeps per user and database: fewer than the clients open (each
/// process has calls from two threads and a renewal thread), so that they share them, and each
/// call may run on another server connection than the one before.
pub const POOL_SIZE: u32 = 3;

/// How long the suite's own queries of the store may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// Which of a client's connections go through the suite's proxy, if there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Every call; the listening connection goes straight to the server.
    Calls,
    /// The listening connection only; the calls go straight to the server (or its pooler).
    Listening,
}

/// A PostgreSQL server, and PgBouncer in front of it if the calls are pooled.
pub struct Deployment {
    server: PgServer,
    bouncer: Option<PgBouncer>,
    /// The suite's connection to the server, as the superuser, opened when first needed.
    own: Option<Connection>,
}

impl Deployment {
    /// Starts the server (and PgBouncer, if `pooled`), the SCRAM user allowed to make the store's
    /// schema.
    pub fn start(pooled: bool) -> Deployment {
        let server = PgServer::start();
        server.grant_schemas();
        let bouncer = pooled.then(|| PgBouncer::start_with_pool_size(&server, POOL_SIZE));
        Deployment {
            server,
            bouncer,
            own: None,
        }
    }

    /// The server's address, for a proxy in front of it.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.server.port()))
    }

    /// The URLs a client gets: the one every call goes to (PgBouncer, if pooled), then the one
    /// its listening connection goes to (the server); `route` says which of them goes through
    /// `proxy` instead.
    pub fn urls(&self, proxy: Option<&Proxy>, route: Route) -> Vec<String> {
        let server = self.server.port();
        let calls = self.bouncer.as_ref().map_or(server, PgBouncer::port);
        let (calls, listening) = match (proxy, route) {
            (Some(proxy), Route::Calls) => (proxy.port(), server),
            (Some(proxy), Route::Listening) => (calls, proxy.port()),
            (None, _) => (calls, server),
        };
        vec![url(calls), url(listening)]
    }

    /// The owner of the hold on the lock now, as the store's table has it.
    pub fn holder(&mut self) -> Option<String> {
        let deadline = Instant::now() + QUERY_TIMEOUT;
        let own = match self.own.take().filter(Connection::is_usable) {
            Some(own) => own,
            None => {
                let config = Config::from_url(&self.server.url()).ok()?;
                Connection::connect(&config, deadline).ok()?
            }
        };
        let own = self.own.insert(own);
        let row = own
            .query_opt(
                "SELECT owner FROM lease.holds WHERE key = $1 AND expires > clock_timestamp() \
                 ORDER BY token DESC LIMIT 1",
                &[Some(LOCK_KEY)],
                deadline,
            )
            .ok()??;
        row.get::<String>("owner").ok()
    }

    /// Freezes the server and every process of it (SIGSTOP) for `frozen`, then lets it run.
    pub fn freeze(&mut self, frozen: Duration) {
        self.own = None;
        self.server.pause();
        std::thread::sleep(frozen);
        self.server.resume();
    }

    /// Stops the server as `how` says and starts it again with its data.
    pub fn restart(&mut self, how: Shutdown) {
        self.own = None;
        self.server.restart(how);
    }
}

/// The SCRAM user's URL of the server, proxy or pooler on `port`.
fn url(port: u16) -> String {
    format!(
        "postgres://{}:{}@127.0.0.1:{port}/postgres",
        PgServer::SCRAM_USER,
        PgServer::SCRAM_PASSWORD
    )
}

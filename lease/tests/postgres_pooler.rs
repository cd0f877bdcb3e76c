//! Through a transaction-mode pooler (PgBouncer), consecutive calls of one client may run on
//! different server connections. A session advisory lock breaks there: its unlock runs on
//! another server connection, finds nothing to release, and the lock stays with the connection
//! it was taken on, in the pool. The store keeps no session state: a hold pins no server
//! connection, and its release frees it from any.

use postgres_blocking::{Config, Connection};
use redis_lease::Client;
use std::time::{Duration, Instant};
use testkit::{PgBouncer, PgOptions, PgServer};

/// A server whose password users may make the store's schema in its database.
fn server() -> PgServer {
    server_with(&[])
}

/// [`server`], started with `settings`.
fn server_with(settings: &[(&str, &str)]) -> PgServer {
    let server = PgServer::start_with(PgOptions {
        settings: settings
            .iter()
            .map(|&(name, value)| (name.to_owned(), value.to_owned()))
            .collect(),
        ..PgOptions::default()
    });
    server.grant_schemas();
    server
}

/// A client whose calls go through `bouncer`, listening on `server` directly, with a lease
/// long enough that no renewal runs during a test.
fn pooled(bouncer: &PgBouncer, server: &PgServer) -> Client {
    Client::postgres(bouncer.scram_url())
        .postgres_listen_url(server.scram_url())
        .default_lease(Duration::from_secs(60))
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// A plain connection through `bouncer` (a session of the pooler, not of the server).
fn through(bouncer: &PgBouncer) -> Connection {
    let config = Config::from_url(&bouncer.scram_url()).expect("a valid URL");
    Connection::connect(&config, soon()).expect("connected through PgBouncer")
}

/// The server process of the server connection `conn`'s statement runs on now.
fn backend(conn: &mut Connection) -> i32 {
    let row = conn
        .query_one("SELECT pg_backend_pid()", &[], soon())
        .expect("an answer");
    row.get::<i32>(0).expect("a pid")
}

/// Keeps the pool's server connection `pid` busy: a transaction opened through `bouncer` (which
/// holds a server connection until it ends) that runs on it. The pool has two server
/// connections, so the other one stays free.
fn pin(bouncer: &PgBouncer, pid: i32) -> Connection {
    let mut first = through(bouncer);
    first.batch_execute("BEGIN", soon()).expect("a transaction");
    if backend(&mut first) == pid {
        return first;
    }
    // The first holds the other server connection: the next transaction gets `pid`.
    let mut second = through(bouncer);
    second
        .batch_execute("BEGIN", soon())
        .expect("a transaction");
    assert_eq!(
        backend(&mut second),
        pid,
        "two server connections in the pool"
    );
    end(first);
    second
}

/// Ends `pinned`'s transaction, handing its server connection back to the pool.
fn end(mut pinned: Connection) {
    pinned.batch_execute("COMMIT", soon()).expect("ended");
}

/// The server process that ran the last statement containing `text`, from the server's log of
/// every statement (each line stamped with its process id, `[pid]`).
fn last_to_run(server: &PgServer, text: &str) -> i32 {
    let log = std::fs::read_to_string(server.log_path()).expect("the server's log");
    let line = log
        .lines()
        .rev()
        .find(|line| line.contains(text) && line.contains("execute"))
        .unwrap_or_else(|| panic!("no statement with {text:?} in the log"));
    let pid = line
        .split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(pid, _)| pid)
        .expect("a process id");
    pid.parse().expect("a pid")
}

#[test]
fn a_session_advisory_lock_taken_through_a_transaction_pooler_is_not_released_by_its_unlock() {
    let server = server();
    let bouncer = PgBouncer::start_with_pool_size(&server, 2);
    let mut session = through(&bouncer);
    let row = session
        .query_one("SELECT pg_advisory_lock(42), pg_backend_pid()", &[], soon())
        .expect("locked");
    let taken_on: i32 = row.get(1).expect("a pid");
    let pinned = pin(&bouncer, taken_on);
    let unlocked = session
        .query_one("SELECT pg_advisory_unlock(42)", &[], soon())
        .expect("an answer");
    assert!(
        !unlocked.get::<bool>(0).expect("a bool"),
        "the unlock ran on the server connection that took the lock"
    );
    // Ended, not dropped: the pooler closes a server connection left in a transaction, and the
    // lock would go with it.
    end(pinned);
    let held = server
        .psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
        .expect("an answer");
    assert_eq!(
        held.trim(),
        "1",
        "the lock stayed with its server connection"
    );
}

#[test]
fn a_hold_taken_through_a_transaction_pooler_is_released_from_another_server_connection() {
    let server = server_with(&[("log_statement", "all")]);
    let bouncer = PgBouncer::start_with_pool_size(&server, 2);
    let holder = pooled(&bouncer, &server);
    let lock = holder.lock("jobs").expect("valid");
    let guard = lock.try_lock().expect("an answer").expect("free");
    let acquired_on = last_to_run(&server, ".acquire(");
    let pinned = pin(&bouncer, acquired_on);

    guard.unlock().expect("released");
    let released_on = last_to_run(&server, ".release(");
    assert_ne!(
        released_on, acquired_on,
        "the release ran where the acquisition did"
    );
    end(pinned);
    let state = lock.inspect().expect("an answer");
    assert!(!state.is_held(), "still held: {state:?}");
    let rival = pooled(&bouncer, &server);
    let taken = rival
        .lock("jobs")
        .expect("valid")
        .try_lock()
        .expect("an answer")
        .expect("free");
    taken.unlock().expect("released");
}

#[test]
fn a_hold_pins_no_server_connection_of_the_pooler() {
    let server = server();
    let bouncer = PgBouncer::start_with_pool_size(&server, 1);
    let holder = pooled(&bouncer, &server);
    let rival = pooled(&bouncer, &server);
    let holders_lock = holder.lock("jobs").expect("valid");
    let rivals_lock = rival.lock("jobs").expect("valid");
    let guard = holders_lock.try_lock().expect("an answer").expect("free");
    // The one server connection serves the rival while the lock is held: a busy answer within
    // its command timeout, and another lock taken and released.
    let asked = Instant::now();
    assert!(rivals_lock.try_lock().expect("an answer").is_none());
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    let other = rival.lock("other").expect("valid");
    other
        .try_lock()
        .expect("an answer")
        .expect("free")
        .unlock()
        .expect("released");
    let mut plain = through(&bouncer);
    assert_eq!(
        plain
            .query_one("SELECT 1", &[], soon())
            .expect("served")
            .get::<i32>(0)
            .expect("an int"),
        1
    );
    drop(plain);
    guard.unlock().expect("released");
    let taken = rivals_lock.try_lock().expect("an answer").expect("free");
    taken.unlock().expect("released");
}

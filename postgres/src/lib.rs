//! A small synchronous PostgreSQL client whose every call ends by its deadline, whatever the
//! server does: a server frozen with `SIGSTOP` (whose kernel still acknowledges TCP), a
//! half-open connection, a peer that drips bytes or speaks another protocol. No async runtime,
//! in this crate or below it: the sockets are [`deadline-net`](deadline_net)'s, and the messages
//! and authentication exchanges are encoded by [`postgres-protocol`](postgres_protocol).
//!
//! It speaks what a coordination store needs, and no more:
//!
//! * [`Config`] from a `postgres://` URL or by setters (TCP or a Unix socket, `sslmode`, a CA
//!   and a client certificate, `application_name`), the password never shown;
//! * [`Connection::connect`]: TLS by the `SSLRequest` handshake, then authentication by
//!   SCRAM-SHA-256, MD5 or (over TLS or a Unix socket, or when allowed) a cleartext password;
//! * statements by the extended protocol with the unnamed statement and portal, so that no
//!   session state is left on the server and a transaction-mode pooler (PgBouncer) works:
//!   [`Connection::query`], [`execute`](Connection::execute),
//!   [`query_one`](Connection::query_one), [`query_opt`](Connection::query_opt), parameters and
//!   results in text format, NULL as `None`, and [`Row::get`] parsing a value as the type asked
//!   for;
//! * several statements in one round trip: a [`Pipeline`], run each on its own
//!   ([`Connection::pipeline`]) or all or nothing ([`Connection::pipeline_atomic`]);
//! * the simple query protocol for statements without parameters
//!   ([`Connection::batch_execute`]);
//! * `LISTEN`/`NOTIFY`: notifications are kept whenever they come, and
//!   [`Connection::wait_notification`] waits for one until a deadline (`LISTEN` is session
//!   state: through a transaction-mode pooler, listen on a connection to the server itself);
//! * [`CancelToken`]: a cancel request on a connection of its own.
//!
//! ```no_run
//! use postgres_blocking::{Config, Connection, Pipeline};
//! use std::time::{Duration, Instant};
//!
//! let config = Config::from_url("postgres://app:secret@localhost/app?sslmode=disable")?;
//! let soon = || Instant::now() + Duration::from_secs(2);
//! let mut conn = Connection::connect(&config, soon())?;
//! conn.batch_execute("CREATE TABLE IF NOT EXISTS holds (name text PRIMARY KEY, token int8)", soon())?;
//! let taken = conn.execute(
//!     "INSERT INTO holds VALUES ($1, 1) ON CONFLICT (name) DO UPDATE SET token = holds.token + 1",
//!     &[Some("orders")],
//!     soon(),
//! )?;
//! assert_eq!(taken, 1);
//! let token: i64 = conn
//!     .query_one("SELECT token FROM holds WHERE name = $1", &[Some("orders")], soon())?
//!     .get("token")?;
//!
//! // Two statements in one round trip, all or nothing.
//! let mut both = Pipeline::new();
//! both.push("UPDATE holds SET token = token + 1 WHERE name = $1", &[Some("orders")])?;
//! both.push("SELECT pg_notify('holds', $1)", &[Some("orders")])?;
//! conn.pipeline_atomic(&both, soon())?;
//!
//! // Waiting for a notification: None once the deadline passes, the connection still usable.
//! conn.batch_execute("LISTEN holds", soon())?;
//! while let Some(note) = conn.wait_notification(soon())? {
//!     assert_eq!((note.channel(), note.payload()), ("holds", "orders"));
//! }
//! # let _ = token;
//! # Ok::<(), postgres_blocking::Error>(())
//! ```
//!
//! # Deadlines
//!
//! Every call takes an [`Instant`](std::time::Instant) by which it ends: connecting (name
//! resolution, TCP, TLS, authentication), each statement or pipeline, a wait, a cancel. A call
//! that fails or overruns closes its connection, so that a late answer is never read as the
//! answer to a later call; [`Connection::is_usable`] says so, and later calls fail with
//! [`Error::Closed`]. A statement whose call timed out may or may not have run, and may still
//! be running on the server (a [`CancelToken`] stops it). Three outcomes leave the connection
//! open: the server's error on a statement ([`Error::Db`] of severity `ERROR`), a wait for a
//! notification that ends by its deadline (`Ok(None)`), and a call whose deadline had passed
//! before it sent anything ([`Error::Timeout`]).
//!
//! # TLS
//!
//! With the `tls` feature, TLS runs over rustls, and never unverified: the server's certificate
//! must chain to a trusted root (the system's, or the CA given) whatever the `sslmode` (as
//! libpq's `require` and `verify-ca` check it when given a root certificate), and with
//! `verify-full` it must also name the host. Without the feature, `prefer` connects without TLS
//! and the modes that require it are refused. SCRAM runs without channel binding.
//!
//! # Logging
//!
//! Through the `log` crate: the server's notices (`WARNING` at warn, `NOTICE` and `INFO` at
//! info, the rest at debug), connections and cancel requests at debug. Never the password.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod cancel;
mod config;
mod connect;
mod connection;
mod db_error;
mod error;
mod exchange;
mod notify;
mod pipeline;
mod row;
mod session;
mod startup;
mod status;
mod wire;

pub use cancel::CancelToken;
pub use config::{Config, Host, SslMode, DEFAULT_PORT};
pub use connection::Connection;
pub use db_error::DbError;
pub use deadline_net::tls::{Pem, TlsFiles};
pub use error::{Error, Result};
pub use notify::Notification;
pub use pipeline::{Outcome, Pipeline};
pub use row::{Column, ColumnIndex, FromText, Row};
pub use status::TransactionStatus;

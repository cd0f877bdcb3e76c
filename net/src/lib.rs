//! Blocking network I/O whose every call ends by its deadline, whatever the peer does: a server
//! that drips one byte every half second, a frozen process whose kernel still acknowledges TCP, a
//! name the resolver cannot resolve.
//!
//! * [`Timed`]: a TCP or Unix socket whose reads and writes end by one deadline set for a whole
//!   call, each read given only the time left; [`Timed::try_clone`] makes a handle that another
//!   thread writes through while one reads, and [`Timed::shutdown`] closes it under both.
//! * [`resolve`], [`connect_tcp`], [`connect_unix`]: addresses and connections by a deadline.
//! * [`tls`]: rustls client sessions over a [`Timed`] socket (the `tls` feature), the handshake
//!   by the same deadline; and [`Stream`], a socket or a session over it.
//!
//! ```no_run
//! use deadline_net::{connect_tcp, Socket, Timed};
//! use std::io::{Read, Write};
//! use std::time::{Duration, Instant};
//!
//! let deadline = Instant::now() + Duration::from_secs(2);
//! let socket = connect_tcp("127.0.0.1", 6379, deadline)?;
//! let mut timed = Timed::new(Socket::Tcp(socket), deadline);
//! timed.write_all(b"PING\r\n")?;
//! let mut reply = [0; 7];
//! timed.read_exact(&mut reply)?; // fails with TimedOut once the deadline passes
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Unix only: the sockets include Unix domain sockets.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(unix))]
compile_error!("deadline-net runs on Unix only (Linux, macOS, the BSDs): it uses Unix sockets");

mod connect;
mod resolve;
mod stream;
mod timed;
pub mod tls;

pub use connect::{connect_tcp, connect_unix};
pub use resolve::resolve;
pub use stream::Stream;
pub use timed::{Socket, Timed};

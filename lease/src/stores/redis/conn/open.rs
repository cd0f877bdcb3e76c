//! Opening a connection's socket by a deadline: TCP to each address of a host, and a Unix socket
//! whose accept queue may be full.

use super::stream::Socket;
use super::{io_error, resolve, Addr};
use redis::{RedisError, RedisResult};
use std::io;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Opens the socket to `addr`, trying each of its addresses, by `deadline`.
pub(super) fn connect(addr: &Addr, deadline: Instant) -> RedisResult<Socket> {
    let left = || {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(io_error(
                io::ErrorKind::TimedOut,
                "connecting took longer than the deadline",
            ))
        } else {
            Ok(left)
        }
    };
    match addr {
        Addr::Tcp { host, port } | Addr::Tls { host, port } => {
            let mut last_error = None;
            for address in resolve::resolve(host, *port, deadline)? {
                match TcpStream::connect_timeout(&address, left()?) {
                    Ok(socket) => {
                        socket.set_nodelay(true)?;
                        return Ok(Socket::Tcp(socket));
                    }
                    Err(error) => last_error = Some(error),
                }
            }
            Err(last_error.map_or_else(
                || io_error(io::ErrorKind::NotFound, format!("{host} has no address")),
                RedisError::from,
            ))
        }
        Addr::Unix(path) => Ok(Socket::Unix(connect_unix(path, left)?)),
    }
}

/// Connects to a Unix socket by the deadline `left` keeps. A plain connect waits for as long as
/// a frozen server's accept queue stays full; a non-blocking one fails at once then
/// (`EAGAIN`), so it is tried again every millisecond until the deadline.
fn connect_unix(
    path: &std::path::Path,
    left: impl Fn() -> RedisResult<Duration>,
) -> RedisResult<UnixStream> {
    let addr = socket2::SockAddr::unix(path)?;
    loop {
        let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
        socket.set_nonblocking(true)?;
        match socket.connect(&addr) {
            Ok(()) => {
                socket.set_nonblocking(false)?;
                return Ok(UnixStream::from(socket));
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(left()?.min(Duration::from_millis(1)));
            }
            Err(error) => return Err(error.into()),
        }
    }
}

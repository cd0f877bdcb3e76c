//! Opening a connection's socket by a deadline: TCP to each address of a host, a Unix socket
//! whose accept queue may be full, and the TLS handshake, which tells a port that speaks plain
//! Redis from one that does not answer.

use super::stream::{Socket, Timed};
use super::{io_error, resolve, tls, Addr, Endpoint};
use redis::{RedisError, RedisResult};
use std::io;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// How long a TLS handshake waits for the server's first bytes before it asks the port, on a
/// second connection, whether it speaks plain Redis (which never answers a handshake).
const ASK_PLAIN_AFTER: Duration = Duration::from_millis(250);

/// Runs the TLS handshake over `timed` (by its deadline). A failure of the handshake itself (a
/// certificate that does not verify, no protocol in common, a port that does not speak TLS) is
/// a refusal, with the code `TLS`; a server that does not answer is an I/O timeout.
pub(super) fn handshake(
    endpoint: &Endpoint,
    host: &str,
    mut timed: Timed,
) -> RedisResult<rustls::StreamOwned<rustls::ClientConnection, Timed>> {
    let refused = |text: String| redis::make_extension_error("TLS".into(), Some(text));
    let config = endpoint
        .tls
        .clone()
        .ok_or_else(|| refused("no TLS configuration for a rediss:// server".into()))?;
    let name = tls::server_name(host).map_err(|error| refused(error.to_string()))?;
    let mut session =
        rustls::ClientConnection::new(config, name).map_err(|error| refused(error.to_string()))?;
    let deadline = timed.deadline();
    // Until the server's first bytes, or the time to ask whether the port is a plain one.
    let mut ask_at = Some(Instant::now() + ASK_PLAIN_AFTER).filter(|at| *at < deadline);
    if let Some(at) = ask_at {
        timed.set_deadline(at);
    }
    while session.is_handshaking() {
        let Err(error) = session.complete_io(&mut timed) else {
            continue;
        };
        if let Some(why) = tls::refusal(&error) {
            return Err(refused(format!("handshake with {host}: {why}")));
        }
        if let (Some(_), io::ErrorKind::TimedOut) = (ask_at.take(), error.kind()) {
            timed.set_deadline(deadline);
            if timed.received() == 0 {
                let plain = timed
                    .tcp_peer()
                    .is_some_and(|peer| tls::speaks_plain_redis(peer, deadline));
                if plain {
                    return Err(refused(format!(
                        "handshake with {host}: the port does not speak TLS (it answers plain \
                         Redis): use redis:// or the server's TLS port"
                    )));
                }
            }
            continue;
        }
        return Err(match error.kind() {
            io::ErrorKind::InvalidData => refused(format!("handshake with {host}: {error}")),
            _ => RedisError::from(error),
        });
    }
    timed.set_deadline(deadline);
    Ok(rustls::StreamOwned::new(session, timed))
}

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

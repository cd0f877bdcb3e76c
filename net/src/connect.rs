//! Opening a socket by a deadline: TCP to each address of a host in turn, and a Unix socket whose
//! accept queue may be full.

use crate::resolve;
use std::io;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The time left before `deadline`, or a timeout error saying what took too long.
fn left(deadline: Instant, what: &str) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} took longer than the deadline"),
        ))
    } else {
        Ok(left)
    }
}

/// A TCP connection to `host:port` (a name, or an IP address, IPv6 in brackets or not), trying
/// each of its addresses in turn, with `TCP_NODELAY` set, by `deadline`.
///
/// # Errors
///
/// The last address's failure, [`io::ErrorKind::TimedOut`] once the deadline passes (resolving
/// included), [`io::ErrorKind::NotFound`] for a name without an address.
pub fn connect_tcp(host: &str, port: u16, deadline: Instant) -> io::Result<TcpStream> {
    let mut last_error = None;
    for address in resolve(host, port, deadline)? {
        match TcpStream::connect_timeout(&address, left(deadline, "connecting")?) {
            Ok(socket) => {
                socket.set_nodelay(true)?;
                return Ok(socket);
            }
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))
    }))
}

/// A connection to the Unix socket at `path` by `deadline`. A plain connect waits for as long as
/// a frozen server's accept queue stays full; a non-blocking one fails at once then (`EAGAIN`),
/// so it is tried again every millisecond until the deadline.
///
/// # Errors
///
/// The system's error, or [`io::ErrorKind::TimedOut`] once the deadline passes.
pub fn connect_unix(path: &Path, deadline: Instant) -> io::Result<UnixStream> {
    let addr = socket2::SockAddr::unix(path)?;
    loop {
        let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
        socket.set_nonblocking(true)?;
        match socket.connect(&addr) {
            Ok(()) => {
                socket.set_nonblocking(false)?;
                return Ok(UnixStream::from(std::os::fd::OwnedFd::from(socket)));
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(left(deadline, "connecting")?.min(Duration::from_millis(1)));
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_listening_port_connects_and_a_past_deadline_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let soon = Instant::now() + Duration::from_secs(5);
        let socket = connect_tcp("127.0.0.1", port, soon).expect("listening");
        assert!(socket.nodelay().expect("a socket"));
        let past = Instant::now() - Duration::from_millis(1);
        let late = connect_tcp("127.0.0.1", port, past).expect_err("too late");
        assert_eq!(late.kind(), io::ErrorKind::TimedOut);
    }

    #[test]
    fn a_unix_socket_connects_by_its_path() {
        let dir = std::env::temp_dir().join(format!("deadline-net-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("socket");
        let _ = std::fs::remove_file(&path);
        let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bound");
        let soon = Instant::now() + Duration::from_secs(5);
        connect_unix(&path, soon).expect("listening");
        let missing = connect_unix(&dir.join("none"), soon).expect_err("no socket there");
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

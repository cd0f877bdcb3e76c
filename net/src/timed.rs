//! [`Timed`]: a socket whose reads and writes end by one deadline for a whole call, however the
//! server feeds it: a server that sends one byte every half second cannot stretch a call past its
//! deadline, because each read is given only the time left. TLS runs over the same socket, so the
//! handshake and every record it reads obey the deadline too.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// How far the socket's timeout may lie beyond the time left before it is set again: setting it
/// costs a system call, so it is left alone while a read could overrun the deadline by no more.
const SLACK: Duration = Duration::from_micros(500);

/// A connected stream socket.
#[derive(Debug)]
pub enum Socket {
    /// A TCP connection.
    Tcp(TcpStream),
    /// A Unix domain socket's connection.
    Unix(UnixStream),
}

/// A socket with a deadline for whatever is read or written until the deadline changes. A read
/// or write past the deadline fails with [`io::ErrorKind::TimedOut`]; one interrupted by a signal
/// (`EINTR`) is made again.
#[derive(Debug)]
pub struct Timed {
    socket: Socket,
    deadline: Instant,
    /// The timeouts set on the socket now (read, write).
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    /// How many bytes were read from the socket.
    received: u64,
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "no answer before the call's deadline",
    )
}

impl Timed {
    /// `socket`, its calls ending by `deadline` until it is set again.
    pub fn new(socket: Socket, deadline: Instant) -> Timed {
        Timed {
            socket,
            deadline,
            read_timeout: None,
            write_timeout: None,
            received: 0,
        }
    }

    /// The deadline of whatever is read or written now.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// How many bytes were read from the socket.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The TCP peer's address, for a TCP socket.
    pub fn tcp_peer(&self) -> Option<std::net::SocketAddr> {
        match &self.socket {
            Socket::Tcp(socket) => socket.peer_addr().ok(),
            Socket::Unix(_) => None,
        }
    }

    /// Sets the deadline of whatever is read or written from now on.
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    /// A second handle to the same socket, with timeouts of its own to set: one thread may read
    /// through one handle while another writes through the other.
    pub fn try_clone(&self) -> io::Result<Timed> {
        let socket = match &self.socket {
            Socket::Tcp(socket) => Socket::Tcp(socket.try_clone()?),
            Socket::Unix(socket) => Socket::Unix(socket.try_clone()?),
        };
        Ok(Timed::new(socket, self.deadline))
    }

    /// Closes the socket for every handle to it: a read blocked on it returns at once.
    pub fn shutdown(&self) {
        let _ = match &self.socket {
            Socket::Tcp(socket) => socket.shutdown(std::net::Shutdown::Both),
            Socket::Unix(socket) => socket.shutdown(std::net::Shutdown::Both),
        };
    }

    /// The time left, or a timeout error if there is none.
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(timed_out())
        } else {
            Ok(left)
        }
    }

    /// Sets the socket's timeout for the next read (`read`) or write to the time left, unless
    /// the one set already ends within [`SLACK`] of the deadline.
    fn arm(&mut self, read: bool) -> io::Result<()> {
        let left = self.left()?;
        let current = if read {
            self.read_timeout
        } else {
            self.write_timeout
        };
        if current.is_some_and(|set| set <= left + SLACK) {
            return Ok(());
        }
        match (&self.socket, read) {
            (Socket::Tcp(socket), true) => socket.set_read_timeout(Some(left))?,
            (Socket::Tcp(socket), false) => socket.set_write_timeout(Some(left))?,
            (Socket::Unix(socket), true) => socket.set_read_timeout(Some(left))?,
            (Socket::Unix(socket), false) => socket.set_write_timeout(Some(left))?,
        }
        if read {
            self.read_timeout = Some(left);
        } else {
            self.write_timeout = Some(left);
        }
        Ok(())
    }

    /// Whether an I/O error is a socket timeout: the time set ran out, not necessarily the
    /// deadline (a timeout set shorter than the time left is set again and retried).
    fn is_timeout(error: &io::Error) -> bool {
        matches!(
            error.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    }

    /// The peer's address as text: `host:port`, or a Unix socket's path.
    pub fn peer(&self) -> Option<String> {
        match &self.socket {
            Socket::Tcp(socket) => socket.peer_addr().ok().map(|addr| addr.to_string()),
            Socket::Unix(socket) => socket
                .peer_addr()
                .ok()
                .and_then(|addr| addr.as_pathname().map(|path| path.display().to_string())),
        }
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.arm(true)?;
            let read = match &mut self.socket {
                Socket::Tcp(socket) => socket.read(buf),
                Socket::Unix(socket) => socket.read(buf),
            };
            match read {
                Ok(n) => {
                    self.received += n as u64;
                    return Ok(n);
                }
                Err(error) if Self::is_timeout(&error) => {
                    // The socket's timeout ran out: either the deadline has passed (the next
                    // `arm` says so) or it was set longer ago than the time left now.
                    self.read_timeout = None;
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            self.arm(false)?;
            let written = match &mut self.socket {
                Socket::Tcp(socket) => socket.write(buf),
                Socket::Unix(socket) => socket.write(buf),
            };
            match written {
                Err(error) if Self::is_timeout(&error) => self.write_timeout = None,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    #[test]
    fn a_peer_that_drips_bytes_cannot_stretch_a_call_past_its_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let dripping = thread::spawn(move || {
            let (mut peer, _) = listener.accept().expect("a client");
            for _ in 0..40 {
                if peer.write_all(b"x").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
        });
        let started = Instant::now();
        let socket = crate::connect_tcp("127.0.0.1", port, started + Duration::from_secs(5))
            .expect("listening");
        let mut timed = Timed::new(Socket::Tcp(socket), started + Duration::from_millis(300));
        let mut call = [0; 100];
        let error = timed
            .read_exact(&mut call)
            .expect_err("100 bytes never come in time");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        let took = started.elapsed();
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert!(timed.received() >= 1, "some bytes came");
        timed.shutdown();
        dripping.join().expect("no panic");
    }
}

//! One TCP connection to one ZooKeeper server: opening it by a deadline, the session handshake
//! (a new session, or the one a lost connection carried), the digest authentication and the
//! re-arming of watches that follow it, and the reading of length-prefixed frames, which keeps a
//! frame cut short by a read's deadline for the next read.

use super::jute::{Reader, MAX_FRAME};
use super::proto::{self, ConnectResponse};
use super::Error;
use deadline_net::{Socket, Timed};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// What a session presents to a server: none yet (id 0, a zeroed password), or the one it has.
#[derive(Debug, Clone)]
pub(crate) struct Credentials {
    /// The session's id; 0 for a new one.
    pub(crate) session_id: i64,
    /// The password the server gave with the session.
    pub(crate) passwd: Vec<u8>,
    /// The largest zxid the session has seen: a server that has seen less refuses it.
    pub(crate) last_zxid: i64,
    /// The session timeout asked for, in milliseconds.
    pub(crate) timeout_ms: i32,
}

impl Credentials {
    /// The credentials of a session still to open, with the timeout asked for.
    pub(crate) fn new_session(timeout_ms: i32) -> Credentials {
        Credentials {
            session_id: 0,
            passwd: vec![0; 16],
            last_zxid: 0,
            timeout_ms,
        }
    }
}

/// An open connection whose handshake is done.
pub(crate) struct Conn {
    /// `host:port` as configured.
    pub(crate) server: String,
    /// The handle the session's thread reads with.
    pub(crate) reader: Timed,
    /// What was read past the handshake, if anything.
    pub(crate) frames: Frames,
    /// The handle callers write with.
    pub(crate) writer: Timed,
    /// A third handle, to close the socket while the others are in use.
    pub(crate) closer: Timed,
    /// The server's answer to the handshake.
    pub(crate) response: ConnectResponse,
}

/// How a handshake ended.
pub(crate) enum Handshake {
    /// The session is open on the connection.
    Open(Box<Conn>),
    /// The server answered that the session asked for is gone (expired, closed, or a wrong
    /// password).
    Expired,
}

/// Why no frame was read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The read's deadline passed; what was read of a frame is kept.
    Timeout,
    /// The connection failed or was closed.
    Lost(String),
    /// The peer sent what is not a frame.
    Protocol(String),
}

/// The frames read from a socket, and the bytes of the next one read so far.
#[derive(Default)]
pub(crate) struct Frames {
    /// Bytes read and not yet cut into frames.
    buffer: Vec<u8>,
}

impl Frames {
    /// The next frame's body, read by `socket`'s deadline.
    pub(crate) fn next(&mut self, socket: &mut Timed) -> Result<Vec<u8>, ReadError> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(frame) = self.take()? {
                return Ok(frame);
            }
            match socket.read(&mut chunk) {
                Ok(0) => return Err(ReadError::Lost("the server closed the connection".into())),
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(error) if is_timeout(&error) => return Err(ReadError::Timeout),
                Err(error) => return Err(ReadError::Lost(error.to_string())),
            }
        }
    }

    /// A whole frame from what was read, if there is one.
    fn take(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        let Some(prefix) = self.buffer.first_chunk::<4>() else {
            return Ok(None);
        };
        let length = i32::from_be_bytes(*prefix);
        let Some(length) = usize::try_from(length).ok().filter(|&n| n <= MAX_FRAME) else {
            return Err(ReadError::Protocol(format!(
                "a frame of {length} bytes (a ZooKeeper server sends 0 to {MAX_FRAME})"
            )));
        };
        if self.buffer.len() < 4 + length {
            return Ok(None);
        }
        let frame = self.buffer[4..4 + length].to_vec();
        self.buffer.drain(..4 + length);
        Ok(Some(frame))
    }
}

/// Whether a read failed for its deadline.
fn is_timeout(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// The error of a handshake with `server` that failed for `why`.
fn unavailable(server: &str, why: impl std::fmt::Display) -> Error {
    Error::Unavailable(format!("{server}: {why}"))
}

/// The error of a peer, `server`, that does not speak ZooKeeper.
fn protocol(server: &str, why: impl std::fmt::Display) -> Error {
    Error::Protocol(format!("{server}: {why}"))
}

/// The error of a read during the handshake with `server`.
fn read_failed(server: &str, error: ReadError) -> Error {
    match error {
        ReadError::Timeout => unavailable(server, "no answer to the handshake in time"),
        ReadError::Lost(why) => unavailable(server, format!("during the handshake: {why}")),
        ReadError::Protocol(why) => protocol(server, why),
    }
}

/// The reading end of a connection, for the session's thread.
pub(super) struct Reading {
    /// The `host:port` it goes to.
    pub(super) server: String,
    /// The handle to read with.
    pub(super) reader: Timed,
    /// What was read of the next frame.
    pub(super) frames: Frames,
    /// The connection's number.
    pub(super) generation: u64,
}

/// Splits `host:port` (an IPv6 address in brackets).
pub fn host_and_port(server: &str) -> Option<(&str, u16)> {
    let (host, port) = server.rsplit_once(':')?;
    let port = port.parse().ok()?;
    (!host.is_empty()).then_some((host, port))
}

/// Opens a TCP connection to `server` by `deadline`, trying each of its addresses.
fn open_socket(server: &str, deadline: Instant) -> Result<TcpStream, Error> {
    let (host, port) =
        host_and_port(server).ok_or_else(|| unavailable(server, "not a host:port"))?;
    deadline_net::connect_tcp(host, port, deadline).map_err(|error| unavailable(server, error))
}

/// Connects to `server` and does the handshake by `deadline`: the session of `credentials`
/// opened or taken up again, the digest authentication (its answer awaited), then the
/// `setWatches` frames `watches` written (their answers are read with the rest).
pub(crate) fn open(
    server: &str,
    credentials: &Credentials,
    digest: Option<&str>,
    watches: &[Vec<u8>],
    deadline: Instant,
) -> Result<Handshake, Error> {
    let socket = open_socket(server, deadline)?;
    let clone = |timed: &Timed| {
        timed
            .try_clone()
            .map_err(|error| unavailable(server, error))
    };
    let mut reader = Timed::new(Socket::Tcp(socket), deadline);
    let mut writer = clone(&reader)?;
    let closer = clone(&reader)?;
    // Whatever fails from here closes the socket when the handles drop.
    let request = proto::connect_request(
        credentials.last_zxid,
        credentials.timeout_ms,
        credentials.session_id,
        &credentials.passwd,
    )
    .ok_or_else(|| protocol(server, "the connect request is too large"))?;
    writer
        .write_all(&request)
        .map_err(|error| unavailable(server, format!("sending the handshake: {error}")))?;
    let mut frames = Frames::default();
    let answer = frames
        .next(&mut reader)
        .map_err(|error| read_failed(server, error))?;
    let response = proto::connect_response(&answer)
        .map_err(|error| protocol(server, format!("a connect response: {}", error.0)))?;
    if response.timeout_ms <= 0 || response.session_id == 0 {
        if credentials.session_id != 0 {
            return Ok(Handshake::Expired);
        }
        return Err(unavailable(server, "the server refused to open a session"));
    }
    if let Some(digest) = digest {
        let auth = proto::digest_auth(digest)
            .ok_or_else(|| unavailable(server, "the digest credentials are too large"))?;
        writer
            .write_all(&auth)
            .map_err(|error| unavailable(server, format!("sending the authentication: {error}")))?;
        loop {
            let frame = frames
                .next(&mut reader)
                .map_err(|error| read_failed(server, error))?;
            let header = proto::reply_header(&mut Reader::new(&frame))
                .map_err(|error| protocol(server, format!("a reply header: {}", error.0)))?;
            match header.xid {
                proto::xid::AUTH if header.err == proto::code::OK => break,
                proto::xid::AUTH => {
                    return Err(unavailable(
                        server,
                        format!(
                            "the digest authentication was refused (code {})",
                            header.err
                        ),
                    ))
                }
                // Nothing else is asked yet: a notification is all there may be, and there
                // is no watch on a connection before `setWatches`.
                proto::xid::NOTIFICATION | proto::xid::PING => {}
                other => {
                    return Err(protocol(
                        server,
                        format!("a reply to call {other}, which was never made"),
                    ))
                }
            }
        }
    }
    for frame in watches {
        writer
            .write_all(frame)
            .map_err(|error| unavailable(server, format!("re-arming the watches: {error}")))?;
    }
    Ok(Handshake::Open(Box::new(Conn {
        server: server.to_owned(),
        reader,
        frames,
        writer,
        closer,
        response,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_ports_are_split() {
        assert_eq!(host_and_port("127.0.0.1:2181"), Some(("127.0.0.1", 2181)));
        assert_eq!(host_and_port("[::1]:2181"), Some(("[::1]", 2181)));
        assert_eq!(host_and_port("zk:x"), None);
        assert_eq!(host_and_port(":1"), None);
        assert_eq!(host_and_port("zk"), None);
    }

    #[test]
    fn frames_are_cut_out_of_what_was_read() {
        let mut frames = Frames::default();
        frames.buffer.extend_from_slice(&[0, 0, 0, 2, 7, 8, 0, 0]);
        assert_eq!(frames.take().expect("valid"), Some(vec![7, 8]));
        assert_eq!(frames.take().expect("valid"), None);
        frames.buffer.extend_from_slice(&[0, 0]);
        assert_eq!(frames.take().expect("valid"), Some(vec![]));
        frames.buffer.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(frames.take(), Err(ReadError::Protocol(_))));
        let mut frames = Frames::default();
        frames.buffer.extend_from_slice(&[0x01, 0x00, 0x00, 0x01]);
        assert!(matches!(frames.take(), Err(ReadError::Protocol(_))));
    }
}

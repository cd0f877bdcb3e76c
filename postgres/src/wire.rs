//! [`Wire`]: the framing of PostgreSQL's messages over a socket or TLS session whose calls end by
//! a deadline. A message is handed on only once it is whole; bytes of one that has not all come
//! stay buffered, so a read that ends by its deadline loses nothing. A first byte that names no
//! message, or a length no message has, is the sign of a peer that speaks something else: it
//! fails at once, and no memory is reserved for what such a peer announces.

use crate::{Error, Result};
use bytes::BytesMut;
use deadline_net::Stream;
use postgres_protocol::message::backend::Message;
use std::io::{self, Read, Write};
use std::time::Instant;

/// The longest message this client reads: the server's limit for one value is 1 GiB.
const MAX_MESSAGE: usize = (1 << 30) + (1 << 20);

/// The first bytes of the messages a server may send (that `postgres-protocol` reads).
const MESSAGE_TAGS: &[u8] = b"123AcCdDEGHIKnNRstSTZ";

/// How much is read from the socket at a time.
const CHUNK: usize = 16 * 1024;

/// A connection's stream, and what was read from it that is not yet a whole message.
pub(crate) struct Wire {
    stream: Stream,
    buffer: BytesMut,
    /// The server, as errors name it.
    server: String,
}

impl Wire {
    /// Messages over `stream`, with `server` named in errors.
    pub(crate) fn new(stream: Stream, server: String) -> Wire {
        Wire {
            stream,
            buffer: BytesMut::new(),
            server,
        }
    }

    /// Sets the deadline of whatever is read or written from now on.
    pub(crate) fn set_deadline(&mut self, deadline: Instant) {
        self.stream.set_deadline(deadline);
    }

    /// Sends `bytes`, all of them, by the deadline.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<()> {
        let written = self
            .stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush());
        written.map_err(|error| self.failure(error, "writing to"))
    }

    /// The next whole message, read by the deadline.
    pub(crate) fn receive(&mut self) -> Result<Message> {
        loop {
            if let Some(message) = self.parse()? {
                return Ok(message);
            }
            let mut chunk = [0u8; CHUNK];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    let closed = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    );
                    return Err(self.failure(closed, "reading from"));
                }
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
                Err(error) => return Err(self.failure(error, "reading from")),
            }
        }
    }

    /// The message at the front of the buffer, if it is whole.
    fn parse(&mut self) -> Result<Option<Message>> {
        let Some(header) = self.buffer.get(..5) else {
            return Ok(None);
        };
        let tag = header[0];
        if !MESSAGE_TAGS.contains(&tag) {
            return Err(Error::Protocol(format!(
                "{} sent a message of unknown type {:?}",
                self.server,
                char::from(tag)
            )));
        }
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if !(4..=MAX_MESSAGE).contains(&length) {
            return Err(Error::Protocol(format!(
                "{} sent a message of type {:?} and length {length}",
                self.server,
                char::from(tag)
            )));
        }
        if self.buffer.len() <= length {
            return Ok(None);
        }
        Message::parse(&mut self.buffer).map_err(|error| {
            Error::Protocol(format!(
                "{} sent a malformed message of type {:?}: {error}",
                self.server,
                char::from(tag)
            ))
        })
    }

    /// The stream itself, for the TLS handshake's first byte.
    pub(crate) fn stream_mut(&mut self) -> &mut Stream {
        &mut self.stream
    }

    /// Closes the socket: a late reply can never be read.
    pub(crate) fn shutdown(&self) {
        self.stream.timed().shutdown();
    }

    /// An I/O failure while `doing` (`"reading from"`, `"writing to"`) the server, as an error:
    /// a TLS refusal, a timeout, or a connection that failed.
    pub(crate) fn failure(&self, error: io::Error, doing: &str) -> Error {
        let during = format!("{doing} {}", self.server);
        match self.stream.refusal() {
            Some(why) => Error::Tls(format!("{during}: {why}")),
            None => classify(error, &during),
        }
    }

    /// The stream, for the TLS handshake over it (nothing is buffered before it).
    pub(crate) fn into_stream(self) -> Stream {
        self.stream
    }
}

/// An I/O failure during `during`, as an error: a timeout, or a connection that failed.
pub(crate) fn classify(error: io::Error, during: &str) -> Error {
    match error.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Error::Timeout {
            during: during.to_owned(),
        },
        _ => Error::Io {
            during: during.to_owned(),
            source: error,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deadline_net::{Socket, Timed};
    use std::net::TcpListener;
    use std::time::Duration;

    /// A wire to a loopback peer that writes what it is sent on `bytes`.
    fn wire_to_peer() -> (
        Wire,
        std::sync::mpsc::Sender<Vec<u8>>,
        std::thread::JoinHandle<()>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let (send, bytes) = std::sync::mpsc::channel::<Vec<u8>>();
        let peer = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("the client");
            for chunk in bytes {
                socket.write_all(&chunk).expect("written");
            }
        });
        let soon = Instant::now() + Duration::from_secs(5);
        let socket = deadline_net::connect_tcp("127.0.0.1", port, soon).expect("connected");
        let stream = Stream::Plain(Timed::new(Socket::Tcp(socket), soon));
        (Wire::new(stream, "peer".into()), send, peer)
    }

    #[test]
    fn a_message_cut_by_the_deadline_is_kept_and_completed_later() {
        let (mut wire, peer, thread) = wire_to_peer();
        // NotificationResponse: 'A', length, process id, channel and payload as C strings.
        let mut message = vec![b'A', 0, 0, 0, 14, 0, 0, 0, 7];
        message.extend_from_slice(b"ch\0hi\0");
        peer.send(message[..7].to_vec()).expect("the peer");
        wire.set_deadline(Instant::now() + Duration::from_millis(200));
        let cut = wire.receive().map(|_| ()).expect_err("half a message");
        assert!(matches!(cut, Error::Timeout { .. }), "{cut:?}");
        peer.send(message[7..].to_vec()).expect("the peer");
        wire.set_deadline(Instant::now() + Duration::from_secs(5));
        match wire.receive() {
            Ok(Message::NotificationResponse(body)) => {
                assert_eq!(body.process_id(), 7);
                assert_eq!(body.channel().expect("UTF-8"), "ch");
                assert_eq!(body.message().expect("UTF-8"), "hi");
            }
            Ok(_) => panic!("another message"),
            Err(error) => panic!("{error:?}"),
        }
        drop(peer);
        thread.join().expect("the peer");
    }

    #[test]
    fn a_first_byte_or_a_length_no_message_has_is_refused_at_once() {
        for bytes in [&b"HTTP/1.1 200 OK\r\n"[..], &b"Zzzzz"[..], &b"x"[..]] {
            let (mut wire, peer, thread) = wire_to_peer();
            peer.send(bytes.to_vec()).expect("the peer");
            let started = Instant::now();
            wire.set_deadline(started + Duration::from_secs(1));
            let error = wire.receive().map(|_| ()).expect_err("not PostgreSQL");
            let refused = matches!(error, Error::Protocol(_));
            // One byte alone is not yet a header: it waits for the deadline.
            assert!(refused || bytes.len() < 5, "{bytes:?}: {error:?}");
            assert_eq!(refused, started.elapsed() < Duration::from_millis(500));
            drop(peer);
            thread.join().expect("the peer");
        }
    }
}

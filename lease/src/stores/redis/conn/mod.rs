//! One connection to one server, every call of which ends by a deadline set for the whole call.
//!
//! The `redis` crate's blocking connection bounds each read of its socket, not a call: a server
//! that drips one byte at a time keeps a call going for as long as it likes, and the socket is not
//! exposed to close it from outside. So this crate keeps its own socket (`deadline_net`'s `Stream`) and
//! lends the rest from the `redis` crate: its RESP parser, its command and pipeline encoding, its
//! URL parsing, and, through [`redis::ConnectionLike`], `Script` (EVALSHA, reloaded on NOSCRIPT),
//! `Pipeline` and the typed commands.
//!
//! A call that fails, or does not finish by its deadline, leaves the connection closed: a late
//! reply must never be read as the answer to the next call. So does a reply that says the server
//! is a replica (`READONLY`, `MASTERDOWN`): the next call must go to the primary.

mod endpoint;
mod link;
mod tls;

pub(crate) use endpoint::{Addr, Endpoint};
pub(crate) use link::{split_commands, transaction_replies, Link};
pub(crate) use tls::{config as tls_config, Config as TlsConfig};

use crate::stores::redis::fencing::Epoch;
use deadline_net::{Socket, Stream, Timed};
use redis::{ConnectionLike, RedisError, RedisResult, Value};
use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether `reply` says the server is a replica (`READONLY`, `MASTERDOWN`: a primary turned
/// replica by a failover, its clients not cut off). No lock call can succeed on that
/// connection, and the next ones must look for the primary: it is used no more.
pub(crate) fn is_from_a_replica(reply: &Value) -> bool {
    matches!(reply, Value::ServerError(error) if matches!(error.code(), "READONLY" | "MASTERDOWN"))
}

/// An I/O error as the `redis` crate reports one.
pub(crate) fn io_error(kind: io::ErrorKind, text: impl Into<String>) -> RedisError {
    RedisError::from(io::Error::new(kind, text.into()))
}

/// A connection taken apart to be shared ([`Conn::split`]): a handle to read its socket and one
/// to write it, the parser of what it reads, and what it was opened with.
pub(crate) struct Halves {
    pub(crate) reader: Timed,
    pub(crate) writer: Timed,
    /// A third handle, to close the socket while the others are in use.
    pub(crate) closer: Timed,
    pub(crate) parser: redis::Parser,
    pub(crate) db: i64,
    pub(crate) epoch: Epoch,
    pub(crate) generation: u64,
    pub(crate) server: Arc<str>,
}

/// What [`Conn::split`] made of a connection.
pub(crate) enum Split {
    Halves(Halves),
    /// The connection itself, which cannot be split.
    Whole(Conn),
}

/// A connection to one server.
pub(crate) struct Conn {
    stream: Stream,
    parser: redis::Parser,
    db: i64,
    open: bool,
    /// Send `ASKING` before each command written while set (a cluster node importing a slot
    /// runs a command for it only so): see [`Conn::ask_each`].
    asking: bool,
    /// Replies to read and drop before the next one is returned (those of `ASKING`).
    skip: usize,
    /// The epoch of the fencing tokens the server hands out on this connection.
    epoch: Epoch,
    /// The generation of the pool that opened it (see `Pool::forget_connections`).
    pub(crate) generation: u64,
    /// The server's address as the client reaches it (`host:port`, a socket's path), which
    /// its errors name.
    server: Arc<str>,
}

impl Conn {
    /// [`Conn::open`], its failure sorted into the crate's error, which names the server.
    pub(crate) fn connect(endpoint: &Endpoint, deadline: Instant) -> crate::Result<Conn> {
        Conn::open(endpoint, deadline).map_err(|error| {
            crate::Error::unavailable_or_refused(error).at(&endpoint.addr.to_string())
        })
    }

    /// Connects and logs in (AUTH, SELECT), all by `deadline`.
    pub(crate) fn open(endpoint: &Endpoint, deadline: Instant) -> RedisResult<Conn> {
        let socket = match &endpoint.addr {
            Addr::Tcp { host, port } | Addr::Tls { host, port } => {
                Socket::Tcp(deadline_net::connect_tcp(host, *port, deadline)?)
            }
            Addr::Unix(path) => Socket::Unix(deadline_net::connect_unix(path, deadline)?),
        };
        let timed = Timed::new(socket, deadline);
        let stream = match &endpoint.addr {
            Addr::Tls { host, .. } => Stream::Tls(Box::new(tls::handshake(endpoint, host, timed)?)),
            _ => Stream::Plain(timed),
        };
        let mut conn = Conn {
            stream,
            parser: redis::Parser::new(),
            db: endpoint.db,
            open: true,
            asking: false,
            skip: 0,
            epoch: Epoch::None,
            generation: 0,
            server: endpoint.addr.to_string().into(),
        };
        let mut login = Vec::new();
        if let Some(password) = &endpoint.password {
            let mut auth = redis::cmd("AUTH");
            if let Some(username) = &endpoint.username {
                auth.arg(username);
            }
            login.push(auth.arg(password).clone());
        }
        if endpoint.db != 0 {
            login.push(redis::cmd("SELECT").arg(endpoint.db).clone());
        }
        for reply in conn.exchange(&login)? {
            // The first refusal is the error (a wrong password, a database out of range).
            reply.extract_error()?;
        }
        Ok(conn)
    }

    /// The server it reaches, as its errors name it (see `Error::server`).
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The epoch of the fencing tokens handed out on this connection.
    pub(crate) fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The connection in halves that two threads may use at once, one reading, one writing;
    /// itself back if it cannot be split: a TLS session is one state for both directions, and
    /// a connection in the middle of a call or asking (`ASKING`) is in no state to share.
    pub(crate) fn split(self) -> Split {
        let Stream::Plain(timed) = &self.stream else {
            return Split::Whole(self);
        };
        if !self.open || self.asking || self.skip > 0 {
            return Split::Whole(self);
        }
        let (Ok(writer), Ok(closer)) = (timed.try_clone(), timed.try_clone()) else {
            return Split::Whole(self);
        };
        let Stream::Plain(reader) = self.stream else {
            return Split::Whole(self);
        };
        Split::Halves(Halves {
            reader,
            writer,
            closer,
            parser: self.parser,
            db: self.db,
            epoch: self.epoch,
            generation: self.generation,
            server: self.server,
        })
    }

    /// Sets the epoch of the fencing tokens handed out on this connection: the one the server
    /// was found to be the primary in when it was opened.
    pub(crate) fn set_epoch(&mut self, epoch: Epoch) {
        self.epoch = epoch;
    }

    /// Sets the deadline of the calls that follow.
    pub(crate) fn set_deadline(&mut self, deadline: Instant) {
        self.stream.set_deadline(deadline);
    }

    /// Whether it runs TLS.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }

    /// The server's address as the socket sees it (after name resolution).
    pub(crate) fn peer(&self) -> Option<String> {
        self.stream.peer()
    }

    /// Whether the connection may still be used: no call on it failed or overran.
    pub(crate) fn is_usable(&self) -> bool {
        self.open
    }

    /// Sends `ASKING` before every command written from now on (a cluster's `ASK` redirect:
    /// the importing node runs one command per `ASKING`, so each command of an operation needs
    /// its own, a pipeline's and a script reload's too), until [`Conn::stop_asking`].
    pub(crate) fn ask_each(&mut self) {
        self.asking = true;
    }

    /// Ends [`Conn::ask_each`].
    pub(crate) fn stop_asking(&mut self) {
        self.asking = false;
    }

    /// Writes `bytes` (one or more packed commands) without reading a reply.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> RedisResult<()> {
        if !self.open {
            return Err(io_error(io::ErrorKind::NotConnected, "connection closed"));
        }
        if self.asking {
            let asking = redis::cmd("ASKING").get_packed_command();
            let written = self.stream.write_all(&asking);
            self.closed_on_error(written.map_err(RedisError::from))?;
            self.skip += 1;
        }
        let written = self.stream.write_all(bytes);
        self.closed_on_error(written.map_err(RedisError::from))
    }

    /// Sends `commands` in one write and reads one reply for each, in order; a refusal is a
    /// `Value::ServerError` among them, not an error of the exchange.
    pub(crate) fn exchange(&mut self, commands: &[redis::Cmd]) -> RedisResult<Vec<Value>> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        if self.asking {
            // `send` puts one `ASKING` before a write; a pipeline needs one before each command.
            return commands
                .iter()
                .map(|command| {
                    self.send(&command.get_packed_command())?;
                    self.receive()
                })
                .collect();
        }
        let mut bytes = Vec::new();
        for command in commands {
            command.write_packed_command(&mut bytes);
        }
        self.send(&bytes)?;
        commands.iter().map(|_| self.receive()).collect()
    }

    /// Writes `bytes` behind a call that got no answer, before the connection is dropped: a
    /// command that lands late is followed by these (an acquisition by its undoing). Errors
    /// are of no use here and are ignored.
    pub(crate) fn send_behind(&mut self, bytes: &[u8]) {
        self.stream
            .set_deadline(Instant::now() + Duration::from_millis(1));
        if self.asking {
            let asking = redis::cmd("ASKING").get_packed_command();
            let _ = self.stream.write_all(&asking);
        }
        let _ = self.stream.write_all(bytes);
        self.open = false;
    }

    /// Reads the next reply (a server error comes back as `Value::ServerError`).
    pub(crate) fn receive(&mut self) -> RedisResult<Value> {
        if !self.open {
            return Err(io_error(io::ErrorKind::NotConnected, "connection closed"));
        }
        while self.skip > 0 {
            let skipped = self.parser.parse_value(&mut self.stream);
            self.closed_on_error(skipped)?;
            self.skip -= 1;
        }
        let value = self.parser.parse_value(&mut self.stream);
        let value = self.closed_on_error(value)?;
        if is_from_a_replica(&value) {
            self.open = false;
        }
        Ok(value)
    }

    /// Reads the next message if one is complete by the deadline: `Ok(None)` otherwise, which
    /// leaves the connection usable (for a subscriber that polls). A message cut by the
    /// deadline is completed by a later poll: the parser keeps what it has read.
    pub(crate) fn poll(&mut self) -> RedisResult<Option<Value>> {
        if !self.open {
            return Err(io_error(io::ErrorKind::NotConnected, "connection closed"));
        }
        match self.parser.parse_value(&mut self.stream) {
            Ok(value) => Ok(Some(value)),
            Err(error) if error.is_timeout() => Ok(None),
            Err(error) => self.closed_on_error(Err(error)),
        }
    }

    fn closed_on_error<T>(&mut self, result: RedisResult<T>) -> RedisResult<T> {
        if result.is_err() {
            self.open = false;
            if let Some(why) = self.stream.refusal() {
                // The server refused the session (a certificate it does not accept, which TLS
                // 1.3 tells only at the first read): no retry mends that.
                return Err(redis::make_extension_error(
                    "TLS".into(),
                    Some(why.to_owned()),
                ));
            }
        }
        result
    }
}

impl Link for Conn {
    fn epoch(&self) -> Epoch {
        Conn::epoch(self)
    }

    fn set_deadline(&mut self, deadline: Instant) {
        Conn::set_deadline(self, deadline);
    }

    fn is_usable(&self) -> bool {
        self.open
    }

    fn exchange(&mut self, commands: &[redis::Cmd]) -> RedisResult<Vec<Value>> {
        Conn::exchange(self, commands)
    }

    fn send_behind(&mut self, bytes: &[u8]) {
        Conn::send_behind(self, bytes);
    }

    fn server(&self) -> &str {
        Conn::server(self)
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.send(cmd)?;
        self.receive()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.send(cmd)?;
        let replies = (0..offset + count)
            .map(|_| self.receive())
            .collect::<RedisResult<Vec<Value>>>()?;
        link::transaction_replies(replies, offset)
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.open
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, Read};

    /// Hands out its bytes in the given pieces, with a "would block" between pieces.
    struct Trickle {
        pieces: Vec<&'static [u8]>,
        blocked: bool,
        kind: io::ErrorKind,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.blocked {
                self.blocked = false;
                return Err(self.kind.into());
            }
            self.blocked = true;
            match self.pieces.first() {
                None => Ok(0),
                Some(piece) => {
                    let n = piece.len().min(buf.len());
                    buf[..n].copy_from_slice(&piece[..n]);
                    self.pieces.remove(0);
                    Ok(n)
                }
            }
        }
    }

    #[test]
    fn a_reply_cut_by_a_timeout_is_resumed_by_the_next_read() {
        for kind in [io::ErrorKind::WouldBlock, io::ErrorKind::TimedOut] {
            resumes_after(kind);
        }
    }

    fn resumes_after(kind: io::ErrorKind) {
        let mut parser = redis::Parser::new();
        let mut input = Trickle {
            pieces: vec![b"*2\r\n:1", b"2\r\n$3\r\nab", b"c\r\n"],
            blocked: false,
            kind,
        };
        let mut failures = 0;
        let value = loop {
            match parser.parse_value(&mut input) {
                Ok(value) => break value,
                Err(error) => {
                    assert!(error.is_io_error(), "{error}");
                    failures += 1;
                    assert!(failures < 10, "never completes");
                }
            }
        };
        assert_eq!(
            value,
            redis::Value::Array(vec![
                redis::Value::Int(12),
                redis::Value::BulkString(b"abc".to_vec())
            ])
        );
    }
}

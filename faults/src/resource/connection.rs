//! A client's connection to the resource server: RESP over a TCP socket, each call bounded by a
//! deadline, whose reads and writes ride out an interrupted system call.
//!
//! Linux fails a blocking call on a socket that has a timeout with `EINTR` when its process is
//! stopped and continued, signal handler or not (signal(7), "Interruption of system calls and
//! library functions by stop signals"), and the suite stops clients on purpose (SIGSTOP, then
//! SIGCONT). The `redis` crate's connection returns that error as the call's, and skips the reply
//! when it comes: a client would end on a write the server made. Here a read or a write that was
//! interrupted is made again, until the call's deadline, and a reply that came while the process
//! was stopped past the deadline is still read.

use redis::{
    ConnectionAddr, ConnectionLike, IntoConnectionInfo, Parser, RedisError, RedisResult, Value,
};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A connection to the resource server, for one thread. Once a call has failed (its deadline
/// passed, the connection closed) it refuses every later call: where its replies stand is unknown.
pub struct Connection {
    socket: TcpStream,
    parser: Parser,
    /// How long a call may take.
    timeout: Duration,
    broken: bool,
}

impl Connection {
    /// Connects to the server at `url` (`redis://HOST:PORT`) within `timeout`, the time each call
    /// is then given too.
    pub fn open(url: &str, timeout: Duration) -> RedisResult<Connection> {
        let info = url.into_connection_info()?;
        let ConnectionAddr::Tcp(host, port) = info.addr() else {
            return Err(io::Error::other(format!("{url}: not a plain TCP address")).into());
        };
        let address = (host.as_str(), *port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::other(format!("{url}: no address")))?;
        let socket = TcpStream::connect_timeout(&address, timeout)?;
        socket.set_nodelay(true)?;
        Ok(Connection {
            socket,
            parser: Parser::new(),
            timeout,
            broken: false,
        })
    }

    /// Sends `command` (packed: one command or several) and reads `replies` replies, all before
    /// one deadline.
    fn call(&mut self, command: &[u8], replies: usize) -> RedisResult<Vec<Value>> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "an earlier call on this connection failed",
            )
            .into());
        }
        let mut socket = Timed {
            socket: &self.socket,
            deadline: Instant::now() + self.timeout,
        };
        let parser = &mut self.parser;
        let result = socket
            .write_all(command)
            .map_err(RedisError::from)
            .and_then(|()| {
                (0..replies)
                    .map(|_| parser.parse_value(&mut socket))
                    .collect()
            });
        // A reply the server sent as an error is a reply: only a failed read or write breaks.
        self.broken = result.is_err();
        result
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let mut replies = self.call(cmd, 1)?;
        replies
            .pop()
            .ok_or_else(|| io::Error::other("no reply").into())
    }

    /// The replies after the first `offset` (those of a transaction's `MULTI` and queued
    /// commands), `count` of them.
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let replies = self.call(cmd, offset + count)?;
        Ok(replies.into_iter().skip(offset).collect())
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        !self.broken
    }
}

/// How long a read or a write may wait past its call's deadline.
const LAST_LOOK: Duration = Duration::from_millis(1);

/// The connection's socket during one call: a read or a write waits no later than the call's
/// deadline, and one that was interrupted is made again.
struct Timed<'a> {
    socket: &'a TcpStream,
    deadline: Instant,
}

impl Timed<'_> {
    /// Runs `io` on the socket, its timeout set (by `set_timeout`) to the time left, until it
    /// returns other than an interruption or a timeout, or the deadline has passed.
    fn until_deadline<T>(
        &mut self,
        set_timeout: fn(&TcpStream, Option<Duration>) -> io::Result<()>,
        mut io: impl FnMut(&TcpStream) -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            // Past the deadline, a last look that hardly waits: the process may have been stopped
            // past it, and the reply have come meanwhile.
            set_timeout(self.socket, Some(left.max(LAST_LOOK)))?;
            match io(self.socket) {
                // The socket's timeout ran out (it may be rounded short of the deadline), or the
                // call was interrupted.
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::Interrupted
                            | io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                    ) =>
                {
                    if left.is_zero() {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the resource server did not answer in time",
                        ));
                    }
                }
                other => return other,
            }
        }
    }
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.until_deadline(TcpStream::set_read_timeout, |mut socket| socket.read(buf))
    }
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.until_deadline(TcpStream::set_write_timeout, |mut socket| socket.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Commands;
    use testkit::RedisServer;

    #[test]
    fn commands_scripts_and_server_errors_pass_through() {
        let server = RedisServer::start();
        let mut connection =
            Connection::open(&server.url(), Duration::from_secs(5)).expect("a connection");
        let () = connection.set("k", 41).expect("SET");
        let value: u64 = connection.incr("k", 1).expect("INCR");
        assert_eq!(value, 42);
        // Unknown to the server at first: NOSCRIPT, then loaded and run.
        let script = redis::Script::new("return tonumber(redis.call('GET', KEYS[1])) + 1");
        let plus_one: u64 = script.key("k").invoke(&mut connection).expect("the script");
        assert_eq!(plus_one, 43);
        let refused: RedisResult<u64> = connection.incr("k", "x");
        assert!(refused.is_err(), "INCR by a non-number: {refused:?}");
        assert!(connection.is_open(), "an error reply leaves it open");
        assert!(connection.check_connection());
    }

    #[test]
    fn a_call_the_server_does_not_answer_fails_by_its_deadline_and_breaks_the_connection() {
        let server = RedisServer::start();
        let mut connection =
            Connection::open(&server.url(), Duration::from_millis(300)).expect("a connection");
        server.pause();
        let began = Instant::now();
        let frozen: RedisResult<String> = redis::cmd("PING").query(&mut connection);
        let took = began.elapsed();
        server.resume();
        let error = frozen.expect_err("no answer from a frozen server");
        assert!(error.is_timeout(), "{error}");
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(5),
            "{took:?}"
        );
        assert!(!connection.is_open());
        let later: RedisResult<String> = redis::cmd("PING").query(&mut connection);
        assert!(later.is_err(), "a broken connection refuses calls");
    }
}

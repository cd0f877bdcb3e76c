//! A TCP proxy between clients and a server (Redis, PostgreSQL), for faults the server cannot
//! make by itself: replies delayed or held, a partition (bytes dropped both ways), connections
//! reset.

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// What the proxy does with the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Carries everything.
    Pass,
    /// Carries requests at once and replies this much later.
    DelayReplies(Duration),
    /// Carries requests, and keeps replies until the mode changes.
    HoldReplies,
    /// Drops everything, both ways, leaving connections open (a partition).
    Blackhole,
}

struct Shared {
    mode: Mutex<Mode>,
    changed: Condvar,
    /// The connections carried now, by number: both ends, to reset them. A connection leaves when
    /// its first pump stops.
    open: Mutex<HashMap<u64, [TcpStream; 2]>>,
    stop: AtomicBool,
}

/// A proxy on a free loopback port in front of `upstream`; stops when dropped.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    pub fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            mode: Mutex::new(Mode::Pass),
            changed: Condvar::new(),
            open: Mutex::new(HashMap::new()),
            stop: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        thread::spawn(move || {
            for (number, client) in (0u64..).zip(listener.incoming()) {
                if accepting.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                carry(&accepting, number, client, server);
            }
        });
        Ok(Proxy { port, shared })
    }

    /// The URL clients connect to.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The loopback port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn set(&self, mode: Mode) {
        *self.shared.mode.lock() = mode;
        self.shared.changed.notify_all();
    }

    /// How many connections it carries now.
    pub fn carried(&self) -> usize {
        self.shared.open.lock().len()
    }

    /// Closes every connection it carries.
    pub fn reset(&self) {
        for stream in self.shared.open.lock().drain().flat_map(|(_, ends)| ends) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.set(Mode::Pass);
        self.reset();
        // Wake the accepting thread so that it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn carry(shared: &Arc<Shared>, number: u64, client: TcpStream, server: TcpStream) {
    let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let (Ok(client_end), Ok(server_end)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    shared.open.lock().insert(number, [client_end, server_end]);
    let requests = Arc::clone(shared);
    thread::spawn(move || pump(&requests, number, client_reader, server, false));
    let replies = Arc::clone(shared);
    thread::spawn(move || pump(&replies, number, server_reader, client, true));
}

/// Copies `from` to `to` under the proxy's mode until either side closes, then closes both.
fn pump(shared: &Shared, number: u64, mut from: TcpStream, mut to: TcpStream, replies: bool) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mode = *shared.mode.lock();
        match mode {
            Mode::Blackhole => continue,
            Mode::DelayReplies(delay) if replies => thread::sleep(delay),
            Mode::HoldReplies if replies => {
                let mut mode = shared.mode.lock();
                while *mode == Mode::HoldReplies && !shared.stop.load(Ordering::SeqCst) {
                    shared.changed.wait(&mut mode);
                }
            }
            _ => {}
        }
        if to.write_all(&buffer[..read]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
    shared.open.lock().remove(&number);
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::RedisServer;

    #[test]
    fn connections_closed_by_their_clients_are_let_go() {
        let server = RedisServer::start();
        let proxy =
            Proxy::start(SocketAddr::from(([127, 0, 0, 1], server.port()))).expect("a free port");
        let client = redis::Client::open(proxy.url()).expect("a valid URL");
        for _ in 0..50 {
            let mut connection = client.get_connection().expect("through the proxy");
            let pong: String = redis::cmd("PING")
                .query(&mut connection)
                .expect("an answer");
            assert_eq!(pong, "PONG");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while proxy.carried() > 0 && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(proxy.carried(), 0, "closed connections still held open");
    }
}

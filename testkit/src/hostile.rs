//! Servers that misbehave on purpose, for tests of deadlines: one that accepts connections and
//! never answers, one that answers whatever comes with the same bytes of another protocol, a proxy that passes requests to a real server at once but drips its replies
//! one byte at a time, and one that loses the replies while it is told to. All listen on a free
//! loopback port and stop when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// A loopback listener that hands each connection to a handler on its own accept thread, until
/// dropped.
struct Listener {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Listener {
    /// Listens on a free loopback port; `handle` gets each accepted connection and the flag that
    /// says the listener was dropped.
    fn serve(handle: impl Fn(TcpStream, &Arc<AtomicBool>) + Send + 'static) -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        let port = listener.local_addr().expect("bound").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(client) = client {
                    handle(client, &stopping);
                }
            }
        });
        Listener { port, stop }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Accepts connections, reads what is sent, and never answers.
pub struct Silent(Listener);

impl Silent {
    /// Listens on a free loopback port until dropped.
    pub fn start() -> Silent {
        Silent(Listener::serve(|mut client, _| {
            thread::spawn(move || {
                let mut sink = [0u8; 4096];
                while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
            });
        }))
    }

    /// `redis://127.0.0.1:port` of the listener.
    pub fn url(&self) -> String {
        self.0.url()
    }

    /// The listener's port, for clients of other protocols.
    pub fn port(&self) -> u16 {
        self.0.port
    }
}

/// Accepts connections and answers each, once it has read something, with the same bytes: a
/// peer that speaks another protocol (an HTTP server, say), for clients that must refuse it.
pub struct Garbage(Listener);

impl Garbage {
    /// Listens on a free loopback port until dropped, answering with `reply`.
    pub fn start(reply: &'static [u8]) -> Garbage {
        Garbage(Listener::serve(move |mut client, _| {
            thread::spawn(move || {
                let mut request = [0u8; 4096];
                if matches!(client.read(&mut request), Ok(n) if n > 0) {
                    let _ = client.write_all(reply);
                }
                let mut sink = [0u8; 4096];
                while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
            });
        }))
    }

    /// The listener's port.
    pub fn port(&self) -> u16 {
        self.0.port
    }
}

/// Passes requests to a real server at once, and its replies back one byte every `interval`.
pub struct Drip(Listener);

impl Drip {
    /// Listens on a free loopback port, passing each connection on to `upstream_port`.
    pub fn start(upstream_port: u16, interval: Duration) -> Drip {
        Drip(Listener::serve(move |client, stopping| {
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)) else {
                return;
            };
            let (Ok(mut requests), Ok(mut upstream)) = (client.try_clone(), server.try_clone())
            else {
                return;
            };
            thread::spawn(move || {
                let _ = std::io::copy(&mut requests, &mut upstream);
            });
            let (mut server, mut client) = (server, client);
            let stop = Arc::clone(stopping);
            thread::spawn(move || {
                let mut byte = [0u8; 1];
                while !stop.load(Ordering::SeqCst) && matches!(server.read(&mut byte), Ok(1)) {
                    thread::sleep(interval);
                    if client.write_all(&byte).is_err() {
                        return;
                    }
                }
            });
        }))
    }

    /// `redis://127.0.0.1:port` of the listener.
    pub fn url(&self) -> String {
        self.0.url()
    }

    /// The listener's port, for clients of other protocols.
    pub fn port(&self) -> u16 {
        self.0.port
    }
}

/// Passes requests to a real server at once, and its replies back, except while it loses them
/// ([`Lossy::lose_replies`]): then the replies are read and dropped, as if lost on the way, while
/// the requests still reach the server.
pub struct Lossy {
    listener: Listener,
    losing: Arc<AtomicBool>,
}

impl Lossy {
    /// Listens on a free loopback port, passing each connection on to `upstream_port`.
    pub fn start(upstream_port: u16) -> Lossy {
        let losing = Arc::new(AtomicBool::new(false));
        let lose = Arc::clone(&losing);
        let listener = Listener::serve(move |client, stopping| {
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)) else {
                return;
            };
            let (Ok(mut requests), Ok(mut upstream)) = (client.try_clone(), server.try_clone())
            else {
                return;
            };
            thread::spawn(move || {
                let _ = std::io::copy(&mut requests, &mut upstream);
            });
            let (mut server, mut client) = (server, client);
            let (stop, lose) = (Arc::clone(stopping), Arc::clone(&lose));
            thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while !stop.load(Ordering::SeqCst) {
                    let Ok(read @ 1..) = server.read(&mut buffer) else {
                        return;
                    };
                    if !lose.load(Ordering::SeqCst) && client.write_all(&buffer[..read]).is_err() {
                        return;
                    }
                }
            });
        });
        Lossy { listener, losing }
    }

    /// Loses every reply from now on (`true`), or passes them on again (`false`).
    pub fn lose_replies(&self, lose: bool) {
        self.losing.store(lose, Ordering::SeqCst);
    }

    /// `redis://127.0.0.1:port` of the listener.
    pub fn url(&self) -> String {
        self.listener.url()
    }
}

//! Servers that misbehave on purpose, for tests of deadlines: one that accepts connections and
//! never answers, and a proxy that passes requests to a real server at once but drips its replies
//! one byte at a time. Both listen on a free loopback port and stop when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

fn listen() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    let port = listener.local_addr().expect("bound").port();
    (listener, port)
}

/// Accepts connections, reads what is sent, and never answers.
pub struct Silent {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Silent {
    /// Listens on a free loopback port until dropped.
    pub fn start() -> Silent {
        let (listener, port) = listen();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut client) = client else { continue };
                thread::spawn(move || {
                    let mut sink = [0u8; 4096];
                    while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
                });
            }
        });
        Silent { port, stop }
    }

    /// `redis://127.0.0.1:port` of the listener.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Passes requests to a real server at once, and its replies back one byte every `interval`.
pub struct Drip {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Drip {
    /// Listens on a free loopback port, passing each connection on to `upstream_port`.
    pub fn start(upstream_port: u16, interval: Duration) -> Drip {
        let (listener, port) = listen();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)) else {
                    continue;
                };
                let (Ok(mut requests), Ok(mut upstream)) = (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                thread::spawn(move || {
                    let _ = std::io::copy(&mut requests, &mut upstream);
                });
                let (mut server, mut client) = (server, client);
                let stop = Arc::clone(&stopping);
                thread::spawn(move || {
                    let mut byte = [0u8; 1];
                    while !stop.load(Ordering::SeqCst) && matches!(server.read(&mut byte), Ok(1)) {
                        thread::sleep(interval);
                        if client.write_all(&byte).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Drip { port, stop }
    }

    /// `redis://127.0.0.1:port` of the listener.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Drip {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

//! A TCP proxy for partition tests: between a client and a server, it can cut the network
//! (connections end, new ones are refused) or freeze it (connections stay open and nothing gets
//! through), until it is healed.
//!
//! [`crate::Gate`] cuts too, but tells peers apart by their source address and has no frozen
//! state; this one treats every connection alike and fronts any address.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Duration;

use crate::redis_server::free_port;

/// What the proxy does with the bytes and connections that reach it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flow {
    /// Passes everything on.
    Open,
    /// Closes every connection and refuses new ones.
    Cut,
    /// Holds connections open, old and new, and passes nothing on.
    Frozen,
}

struct State {
    flow: Flow,
    /// Set when the proxy is dropped: every thread of it ends.
    stopped: bool,
    /// The sockets of every connection through the proxy (the client's, and the target's once
    /// connected), by connection, to close on a cut.
    links: Vec<(u64, Vec<TcpStream>)>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled whenever the flow changes or the proxy stops.
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits while the proxy is frozen; `true` if it then passes bytes on, `false` if it is cut
    /// or stopped.
    fn wait_open(&self) -> bool {
        let mut state = self.lock();
        while state.flow == Flow::Frozen && !state.stopped {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.flow == Flow::Open && !state.stopped
    }

    /// Sets the flow; a cut (or a stop) closes every connection.
    fn set(&self, flow: Flow, stop: bool) {
        let mut state = self.lock();
        state.flow = flow;
        state.stopped |= stop;
        if flow == Flow::Cut || state.stopped {
            for (_, sockets) in state.links.drain(..) {
                for socket in sockets {
                    let _ = socket.shutdown(Shutdown::Both);
                }
            }
        }
        self.changed.notify_all();
    }

    /// Records a socket of connection `id`; `false` (and the socket closed) if the proxy was
    /// cut or stopped meanwhile.
    fn add(&self, id: u64, socket: &TcpStream) -> bool {
        let Ok(socket) = socket.try_clone() else {
            return false;
        };
        let mut state = self.lock();
        if state.flow == Flow::Cut || state.stopped {
            let _ = socket.shutdown(Shutdown::Both);
            return false;
        }
        match state.links.iter_mut().find(|(link, _)| *link == id) {
            Some((_, sockets)) => sockets.push(socket),
            None => state.links.push((id, vec![socket])),
        }
        true
    }

    /// Forgets connection `id`, which ended.
    fn remove(&self, id: u64) {
        self.lock().links.retain(|(link, _)| *link != id);
    }
}

/// A TCP proxy on a free loopback port in front of `target`, until dropped: [`Proxy::cut`]
/// closes every connection through it and refuses new ones (accepts, then closes at once) until
/// [`Proxy::heal`]; [`Proxy::freeze`] keeps connections open but forwards nothing until
/// [`Proxy::heal`] (a silent network).
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listens on a free loopback port, passing every connection on to `target`.
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = (0..10)
            .find_map(|_| TcpListener::bind(("127.0.0.1", free_port(None))).ok())
            .expect("a free loopback port for the proxy");
        let port = listener.local_addr().expect("bound").port();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                flow: Flow::Open,
                stopped: false,
                links: Vec::new(),
            }),
            changed: Condvar::new(),
        });
        let accepting = Arc::clone(&shared);
        thread::spawn(move || {
            let mut next_id = 0u64;
            for client in listener.incoming() {
                if accepting.lock().stopped {
                    return;
                }
                let Ok(client) = client else { continue };
                let id = next_id;
                next_id += 1;
                // Refused while cut: dropped, so closed at once.
                if accepting.add(id, &client) {
                    let shared = Arc::clone(&accepting);
                    thread::spawn(move || pass(id, client, target, &shared));
                }
            }
        });
        Proxy { port, shared }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port` of the proxy, as a ZooKeeper connect string takes it.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Closes every connection through the proxy, and closes new ones as soon as they are
    /// accepted, until [`Proxy::heal`].
    pub fn cut(&self) {
        self.shared.set(Flow::Cut, false);
    }

    /// Passes nothing on, either way, until [`Proxy::heal`]: connections stay open, and new
    /// ones are accepted but not passed on to the target. What is sent meanwhile is held and
    /// delivered on [`Proxy::heal`], as TCP would once a silent network came back.
    pub fn freeze(&self) {
        self.shared.set(Flow::Frozen, false);
    }

    /// Passes everything on again, after [`Proxy::cut`] or [`Proxy::freeze`].
    pub fn heal(&self) {
        self.shared.set(Flow::Open, false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.set(Flow::Cut, true);
        // Wakes the accept loop, which then sees that the proxy stopped.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Connects connection `id` from `client` to `target` once the proxy lets it through, then
/// copies bytes both ways until either side ends or the proxy is cut.
fn pass(id: u64, client: TcpStream, target: SocketAddr, shared: &Arc<Shared>) {
    let server = if shared.wait_open() {
        TcpStream::connect_timeout(&target, Duration::from_secs(5)).ok()
    } else {
        None
    };
    let Some(server) = server.filter(|server| shared.add(id, server)) else {
        let _ = client.shutdown(Shutdown::Both);
        shared.remove(id);
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else {
        shared.remove(id);
        return;
    };
    let upstream = Arc::clone(shared);
    let copier = thread::spawn(move || copy(client_reader, server, &upstream));
    copy(server_reader, client, shared);
    let _ = copier.join();
    shared.remove(id);
}

/// Copies `from` to `to`, holding what it read while the proxy is frozen, until either ends or
/// the proxy is cut; then ends both.
fn copy(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if !shared.wait_open() || to.write_all(&buffer[..read]).is_err() {
            break;
        }
    }
    // An end is held like bytes while the proxy is frozen.
    shared.wait_open();
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

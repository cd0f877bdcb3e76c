//! A proxy that can cut a server off from some of its peers while it keeps serving the others:
//! a network partition on one machine. Peers are told apart by the loopback address their
//! connections come from (a server started with `bind-source-addr 127.0.0.2` connects from
//! there; clients of the tests connect from 127.0.0.1).
//!
//! Cutting a peer off closes its connections through the gate and refuses its new ones (they
//! are accepted and closed at once) until the gate is opened again; the server behind the gate
//! notices nothing but connections that end.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;

/// The loopback address that servers of a partitionable set connect from.
pub const PEER_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// Who the gate lets through.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Passes {
    Everyone,
    AllBut(IpAddr),
    Nobody,
}

impl Passes {
    fn lets(self, peer: IpAddr) -> bool {
        match self {
            Passes::Everyone => true,
            Passes::AllBut(cut) => peer != cut,
            Passes::Nobody => false,
        }
    }
}

struct State {
    passes: Passes,
    /// Each connection's peer address and both of its sockets, to close on a cut.
    links: Vec<(IpAddr, TcpStream, TcpStream)>,
}

/// A proxy on a free loopback port in front of a server on `upstream` port, until dropped.
pub struct Gate {
    port: u16,
    upstream: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl Gate {
    /// Listens on a free loopback port, passing every connection on to `upstream_port`.
    pub fn start(upstream_port: u16) -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        let port = listener.local_addr().expect("bound").port();
        let state = Arc::new(Mutex::new(State {
            passes: Passes::Everyone,
            links: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, stopping) = (Arc::clone(&state), Arc::clone(&stop));
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(client) = client {
                    pass(client, upstream_port, &shared);
                }
            }
        });
        Gate {
            port,
            upstream: upstream_port,
            state,
            stop,
        }
    }

    /// The gate's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the server behind the gate.
    pub fn upstream(&self) -> u16 {
        self.upstream
    }

    /// `redis://127.0.0.1:port` of the gate.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Cuts every connection from `peer` and refuses its new ones.
    pub fn cut_off(&self, peer: IpAddr) {
        self.set(Passes::AllBut(peer));
    }

    /// Cuts every connection and refuses new ones.
    pub fn close(&self) {
        self.set(Passes::Nobody);
    }

    /// Lets everyone through again.
    pub fn open(&self) {
        self.set(Passes::Everyone);
    }

    fn set(&self, passes: Passes) {
        let mut state = lock(&self.state);
        state.passes = passes;
        state.links.retain(|(peer, client, server)| {
            let keep = passes.lets(*peer);
            if !keep {
                let _ = client.shutdown(Shutdown::Both);
                let _ = server.shutdown(Shutdown::Both);
            }
            keep
        });
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        self.set(Passes::Nobody);
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Passes `client` on to the server, unless its peer is cut off.
fn pass(client: TcpStream, upstream_port: u16, state: &Arc<Mutex<State>>) {
    let Ok(peer) = client.peer_addr().map(|address| address.ip()) else {
        return;
    };
    if !lock(state).passes.lets(peer) {
        return; // Dropped: closed at once.
    }
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)) else {
        return;
    };
    let (Ok(client_side), Ok(server_side)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    {
        let mut state = lock(state);
        if !state.passes.lets(peer) {
            return;
        }
        state.links.push((peer, client_side, server_side));
        // Links whose sockets both ended are let go.
        state
            .links
            .retain(|(_, client, _)| client.peer_addr().is_ok());
    }
    copy_in_thread(client.try_clone(), server.try_clone());
    copy_in_thread(Ok(server), Ok(client));
}

/// Copies `from` to `to` on a thread of its own until either ends, then ends both.
fn copy_in_thread(from: std::io::Result<TcpStream>, to: std::io::Result<TcpStream>) {
    let (Ok(mut from), Ok(mut to)) = (from, to) else {
        return;
    };
    thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.flush();
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

//! A real `redis-server` for tests: started on a free loopback port in a temporary directory,
//! killed on drop. It can be paused (SIGSTOP), resumed, restarted on the same port, and have its
//! scripts flushed. A missing binary fails the test with a message saying so.

use std::hash::{BuildHasher, RandomState};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A `redis-server` child process, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

fn binary() -> PathBuf {
    let candidates = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates
        .into_iter()
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join("redis-server"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "redis-server not found on PATH: these tests need a real server \
                 (scripts/test installs it with apt-get)"
            )
        })
}

/// Ports the servers use: below Linux's ephemeral range (32768 and up), so that no outgoing
/// connection takes a stopped server's port as its own. A client reconnecting to a stopped
/// server on an ephemeral port can even connect to itself, and then the server cannot start again.
const PORTS: std::ops::Range<u16> = 20_000..32_768;

/// A free loopback port from [`PORTS`], drawn at random so that test processes running side by
/// side rarely try the same one.
fn free_port() -> u16 {
    let random = RandomState::new();
    let span = u64::from(PORTS.end - PORTS.start);
    (0u32..10_000)
        .map(|attempt| PORTS.start + (random.hash_one(attempt) % span) as u16)
        .find(|&port| TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free loopback port between 20000 and 32767")
}

impl RedisServer {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut server = RedisServer {
            child: None,
            port: free_port(),
            dir,
        };
        // Another process may take the port between the check and the server's bind.
        for _ in 0..5 {
            if server.spawn() {
                return server;
            }
            server.port = free_port();
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    /// Starts the server on its port and waits until it answers; `false` if it exited first (its
    /// port was taken).
    fn spawn(&mut self) -> bool {
        let child = Command::new(binary())
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let child = self.child.insert(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if child.try_wait().ok().flatten().is_some() {
                self.child = None;
                return false;
            }
            let ready = redis::Client::open(format!("redis://127.0.0.1:{}", self.port))
                .and_then(|client| client.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con));
            if ready.is_ok() {
                return true;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer within 10 s"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on the same port, waiting for the port to be free for up to 10 s.
    fn respawn(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn() {
            assert!(
                Instant::now() < deadline,
                "redis-server could not take its port {} again within 10 s",
                self.port
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn connection(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("valid url");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the test server");
        con.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("set a read timeout");
        con
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Kills the server and starts a fresh one (empty: nothing is persisted) on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.respawn();
    }

    /// Kills the server: connections to its port are refused until [`RedisServer::start_again`].
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Starts a fresh server (empty) on the same port after [`RedisServer::stop`].
    pub fn start_again(&mut self) {
        if self.child.is_none() {
            self.respawn();
        }
    }

    pub fn flush_scripts(&self) {
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut self.connection())
            .expect("SCRIPT FLUSH");
    }

    /// Starts recording every command the server runs (`MONITOR`).
    pub fn monitor(&self) -> crate::Monitor {
        crate::Monitor::start(self.port)
    }

    /// Calls of a command so far, from `INFO commandstats` (0 if never called).
    pub fn command_calls(&self, command: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.connection())
            .expect("INFO commandstats");
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0)
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

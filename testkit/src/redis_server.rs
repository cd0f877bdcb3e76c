//! A real `redis-server` for tests: started on a free loopback port in a temporary directory,
//! killed on drop. It can be paused (SIGSTOP), resumed, restarted on the same port, and have its
//! scripts flushed. A missing binary fails the test with a message saying so.

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

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().expect("bound address").port()
}

impl RedisServer {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut server = RedisServer {
            child: None,
            port: free_port(),
            dir,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
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
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ready = redis::Client::open(self.url())
                .and_then(|client| client.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con));
            if ready.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer within 10 s"
            );
            thread::sleep(Duration::from_millis(20));
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
        self.spawn();
    }

    /// Kills the server: connections to its port are refused until [`RedisServer::start_again`].
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Starts a fresh server (empty) on the same port after [`RedisServer::stop`].
    pub fn start_again(&mut self) {
        if self.child.is_none() {
            self.spawn();
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

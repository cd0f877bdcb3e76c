//! A real `redis-server` for tests: started on a free loopback port in a temporary directory,
//! killed on drop. It can be paused (SIGSTOP), resumed, restarted on the same port, and have its
//! scripts flushed. A missing binary fails the test with a message saying so, and a server that
//! exits at start fails it with the end of the server's log.
//!
//! Beside its TCP port, every server listens on a unix socket in its directory. The same process
//! type serves as a TLS server ([`crate::tls`]), a cluster node ([`crate::cluster`]) and a Sentinel
//! ([`crate::sentinel`]): what differs is said once, in [`Launch`].

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::hash::{BuildHasher, RandomState};
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// A `redis-server` child process, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// The cluster bus port of a cluster node.
    bus_port: Option<u16>,
    dir: tempfile::TempDir,
    launch: Launch,
    /// Whether the process is stopped by SIGSTOP.
    paused: AtomicBool,
    /// The ACL users set so far, as `ACL SETUSER` arguments, set again after a restart.
    pub(crate) acl_users: Mutex<Vec<Vec<String>>>,
}

/// How a server is started: what kind of server, and the settings given beside the defaults.
pub(crate) struct Launch {
    pub(crate) mode: Mode,
    /// Whether the server is a cluster node, which takes a second free port for its cluster bus.
    pub(crate) cluster_bus: bool,
    /// Settings given beside the defaults, as `--name value` pairs.
    pub(crate) extra: Vec<String>,
}

/// The kind of server, which decides how it listens and how it is seen to be ready.
pub(crate) enum Mode {
    /// A plain TCP server.
    Plain,
    /// A server whose port speaks TLS only (no plain TCP port).
    Tls(crate::tls::TlsSettings),
    /// `redis-server --sentinel` with its configuration file (which Sentinel rewrites); with
    /// `tls`, its port speaks TLS only and it reaches the servers and Sentinels over TLS.
    Sentinel {
        config: PathBuf,
        tls: Option<crate::tls::TlsSettings>,
    },
}

impl Mode {
    /// The TLS settings of a server whose port speaks TLS only.
    pub(crate) fn tls(&self) -> Option<&crate::tls::TlsSettings> {
        match self {
            Mode::Tls(tls) | Mode::Sentinel { tls: Some(tls), .. } => Some(tls),
            Mode::Plain | Mode::Sentinel { tls: None, .. } => None,
        }
    }
}

/// Ports the servers use: below Linux's ephemeral range (32768 and up), so that no outgoing
/// connection takes a stopped server's port as its own. A client reconnecting to a stopped
/// server on an ephemeral port can even connect to itself, and then the server cannot start again.
const PORTS: std::ops::Range<u16> = 20_000..32_768;

/// Ports this process has handed out, never handed out again: tests running side by side in one
/// process cannot draw the same port while a server is still starting on it.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A free loopback port from [`PORTS`], other than `except` and any this process handed out
/// before, drawn at random so that test processes running side by side rarely try the same one.
pub(crate) fn free_port(except: Option<u16>) -> u16 {
    let random = RandomState::new();
    let span = u64::from(PORTS.end - PORTS.start);
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    let port = (0u32..10_000)
        .map(|attempt| PORTS.start + (random.hash_one(attempt) % span) as u16)
        .filter(|&port| Some(port) != except && !handed_out.contains(&port))
        .find(|&port| TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free loopback port between 20000 and 32767");
    handed_out.insert(port);
    port
}

/// What a server that cannot bind its port writes to its log before it exits.
const PORT_TAKEN: &str = "Address already in use";

impl RedisServer {
    /// A plain server with the default settings.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with more settings, such as `["--requirepass", "s3cret"]`.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::launch(Launch {
            mode: Mode::Plain,
            cluster_bus: false,
            extra: extra.iter().map(|arg| (*arg).to_owned()).collect(),
        })
    }

    /// Starts a server as `launch` says, on free ports.
    pub(crate) fn launch(launch: Launch) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut server = RedisServer {
            child: None,
            port: 0,
            bus_port: None,
            dir,
            launch,
            paused: AtomicBool::new(false),
            acl_users: Mutex::new(Vec::new()),
        };
        // Another process may take a port between the check and the server's bind.
        for _ in 0..5 {
            server.port = free_port(None);
            if server.launch.cluster_bus {
                server.bus_port = Some(free_port(Some(server.port)));
            }
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    /// Starts the server on its port and waits until it answers; `false` if it exited first
    /// because its port was taken. Any other exit fails the test with the server's log.
    fn spawn(&mut self) -> bool {
        let log_path = self.log_path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("open the server's log");
        let log_start = log.metadata().map(|meta| meta.len()).unwrap_or(0);
        let mut command = crate::tied::command(&crate::programs::binary("redis-server"));
        if let Mode::Sentinel { config, .. } = &self.launch.mode {
            command.arg(config).arg("--sentinel");
        }
        match self.launch.mode.tls() {
            Some(tls) => command
                .args(["--port", "0"])
                .args(tls.server_args(self.port)),
            None => command.args(["--port", &self.port.to_string()]),
        };
        command
            .args(["--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--unixsocket")
            .arg(self.unix_socket());
        if !matches!(self.launch.mode, Mode::Sentinel { .. }) {
            command
                .args(["--save", "", "--appendonly", "no"])
                .args(["--enable-debug-command", "local"]);
        }
        if let Some(bus_port) = self.bus_port {
            command.args(["--cluster-port", &bus_port.to_string()]);
        }
        command
            .args(&self.launch.extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("share the log file"))
            .stderr(log);
        let child = crate::tied::spawn(command).expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                let log = log_since(&log_path, log_start);
                if log.contains(PORT_TAKEN) {
                    return false;
                }
                let hint = match self.launch.mode.tls() {
                    Some(_) => {
                        " (a redis-server built without TLS support exits so when given --tls-port)"
                    }
                    None => "",
                };
                panic!("redis-server exited at start ({status}){hint}; its log:\n{log}");
            }
            match self.answers() {
                Ok(()) => return true,
                Err(last) => assert!(
                    Instant::now() < deadline,
                    "redis-server did not answer within 10 s: {last}; its log:\n{}",
                    log_since(&log_path, log_start)
                ),
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server answers a PING (a refusal such as NOAUTH is an answer too); over TLS
    /// for a TLS server.
    fn answers(&self) -> Result<(), String> {
        let ready = redis::Client::open(self.admin_url())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con));
        match ready {
            Err(error) if error.code().is_none() => return Err(error.to_string()),
            Ok(_) | Err(_) => {}
        }
        match self.launch.mode.tls() {
            Some(tls) => tls.ping(self.port),
            None => Ok(()),
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
        self.set_acl_users_again();
    }

    /// The port clients connect to (TLS only on a TLS server).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The kind of server this is.
    pub(crate) fn mode(&self) -> &Mode {
        &self.launch.mode
    }

    /// The server's `--requirepass`, if it was given one.
    pub(crate) fn requirepass(&self) -> Option<&str> {
        self.launch
            .extra
            .windows(2)
            .find(|pair| pair[0] == "--requirepass")
            .map(|pair| pair[1].as_str())
    }

    /// `redis://127.0.0.1:port`, or `rediss://127.0.0.1:port` on a TLS server.
    pub fn url(&self) -> String {
        match self.launch.mode.tls() {
            Some(_) => format!("rediss://127.0.0.1:{}", self.port),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    /// The unix socket the server also listens on, in its temporary directory.
    pub fn unix_socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// `redis+unix:///path/to/redis.sock`: the server through its unix socket.
    pub fn unix_url(&self) -> String {
        format!("redis+unix://{}", self.unix_socket().display())
    }

    /// The server's temporary directory, which holds its log and, for a cluster node, its
    /// `nodes.conf`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The file the server's standard output and standard error go to, across restarts.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// The last `lines` lines of the server's log, headed by its port, for a failure message.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let tail = all[all.len().saturating_sub(lines)..].join("\n");
        format!("\n--- log of port {} ---\n{tail}", self.port)
    }

    /// The URL of the admin connection: plain TCP, except on a TLS server, which has no plain
    /// port and is reached through its unix socket.
    fn admin_url(&self) -> String {
        match self.launch.mode.tls() {
            Some(_) => self.unix_url(),
            None => self.url(),
        }
    }

    /// A connection for test code (through the unix socket on a TLS server), with a 5 s connect
    /// timeout and a 10 s read timeout. It does not authenticate.
    pub fn connection(&self) -> redis::Connection {
        let client = redis::Client::open(self.admin_url()).expect("valid url");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the test server");
        con.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("set a read timeout");
        con
    }

    /// A connection for testkit's own commands: authenticated with the server's `--requirepass`
    /// if it has one, and with 2 s / 5 s connect and read timeouts.
    pub(crate) fn admin(&self) -> redis::RedisResult<redis::Connection> {
        let mut con = redis::Client::open(self.admin_url())?
            .get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(Duration::from_secs(5)))?;
        con.set_write_timeout(Some(Duration::from_secs(5)))?;
        if let Some(password) = self.requirepass() {
            redis::cmd("AUTH").arg(password).query::<()>(&mut con)?;
        }
        Ok(con)
    }

    /// Runs one command on an admin connection; `Err` says which server failed and how.
    pub(crate) fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, String> {
        self.admin()
            .and_then(|mut con| cmd.query(&mut con))
            .map_err(|error| format!("port {}: {error}", self.port))
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
        self.paused.store(true, Ordering::SeqCst);
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Whether the server is paused by [`RedisServer::pause`].
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Whether the process runs (paused or not): started, and not stopped since.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Whether the server runs and is not paused, so that it answers.
    pub(crate) fn is_answering(&self) -> bool {
        self.is_running() && !self.is_paused()
    }

    /// Kills the server and starts a fresh one (empty: nothing is persisted) on the same port.
    /// ACL users set with [`RedisServer::acl_setuser`] are set again; a cluster node keeps its
    /// identity (its `nodes.conf`) and a Sentinel its configuration file.
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

    /// Removes every Lua script from the server's cache (`SCRIPT FLUSH`).
    pub fn flush_scripts(&self) {
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut self.connection())
            .expect("SCRIPT FLUSH");
    }

    /// Starts recording every command the server runs (`MONITOR`).
    pub fn monitor(&self) -> crate::Monitor {
        match self.launch.mode.tls() {
            Some(_) => {
                let stream = std::os::unix::net::UnixStream::connect(self.unix_socket())
                    .expect("connect for MONITOR");
                stream
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .expect("set a read timeout");
                crate::Monitor::start(stream)
            }
            None => {
                let stream = std::net::TcpStream::connect(("127.0.0.1", self.port))
                    .expect("connect for MONITOR");
                stream
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .expect("set a read timeout");
                crate::Monitor::start(stream)
            }
        }
    }

    /// Sets the server's setting `name` to `value` (`CONFIG SET`): a `maxmemory` of 1 makes it a
    /// full server, which refuses writes with `OOM`.
    pub fn config_set(&self, name: &str, value: impl redis::ToRedisArgs) {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut self.connection())
            .unwrap_or_else(|error| panic!("CONFIG SET {name}: {error}"));
    }

    /// Resets the server's statistics (`CONFIG RESETSTAT`), so that [`RedisServer::command_calls`]
    /// counts from now.
    pub fn reset_stats(&self) {
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut self.connection())
            .expect("CONFIG RESETSTAT");
    }

    /// How many connections are subscribed to `channel` (`PUBSUB NUMSUB`): a client waiting on
    /// it by pub/sub shows here.
    pub fn subscribers(&self, channel: &str) -> u64 {
        let (_, subscribers): (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut self.connection())
            .expect("PUBSUB NUMSUB");
        subscribers
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
        self.paused.store(false, Ordering::SeqCst);
    }
}

/// What the log at `path` holds past byte `start` (the last 40 lines of it).
fn log_since(path: &Path, start: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = fs::File::open(path) {
        let _ = file.seek(SeekFrom::Start(start));
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

//! A real PostgreSQL 15 server for tests (Debian's, under `/usr/lib/postgresql/15/bin`): a
//! fresh cluster made with `initdb` in a temporary directory, `postgres` started on a free
//! loopback port (of 127.0.0.1 and [`PgServer::UNNAMED_ADDRESS`]) and on a Unix socket in that
//! directory, killed on drop. Run as the `postgres`
//! user when the test runs as root, which PostgreSQL refuses.
//!
//! Every server has the superuser `postgres` (trusted, over the socket and loopback TCP) and
//! three password users, each authenticated by its own method: [`PgServer::SCRAM_USER`]
//! (`scram-sha-256`), [`PgServer::MD5_USER`] (`md5`, its password stored as an MD5 hash) and
//! [`PgServer::CLEARTEXT_USER`] (`password`: sent in cleartext). With TLS, the server presents a
//! certificate of the testkit's CA, and TCP connections may be required to use TLS
//! (`hostssl` rules) and to present a client certificate.

mod clock;
mod init;
mod signals;

use crate::tls::TlsCertificates;
pub(crate) use signals::is_root;
use signals::{children, signal};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Where Debian's PostgreSQL 15 programs are.
const BIN: &str = "/usr/lib/postgresql/15/bin";

/// How long a server may take to start (crash recovery included) or stop.
const START_WITHIN: Duration = Duration::from_secs(60);

/// How a [`PgServer`] is started.
#[derive(Clone, Default)]
pub struct PgOptions {
    /// TLS on its TCP port, with certificates of the testkit's CA.
    pub tls: Option<PgTls>,
    /// Settings given on the server's command line (`-c name=value`), such as
    /// `("synchronous_commit", "off")`.
    pub settings: Vec<(String, String)>,
}

/// TLS settings of a [`PgServer`].
#[derive(Clone, Default)]
pub struct PgTls {
    /// The certificates to use; fresh ones when `None`.
    pub certificates: Option<Arc<TlsCertificates>>,
    /// TCP connections without TLS are refused (the superuser's included).
    pub required: bool,
    /// TLS clients must present a certificate that the CA signed (`clientcert=verify-ca`).
    pub client_certificates: bool,
}

/// How a server is stopped: PostgreSQL's fast shutdown (sessions ended, a checkpoint) or its
/// immediate one (no checkpoint: the next start recovers from the WAL, as after a crash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// `SIGINT`: sessions are ended and a checkpoint written.
    Fast,
    /// `SIGQUIT`: every process exits at once.
    Immediate,
}

/// A `postgres` server process, killed on drop.
pub struct PgServer {
    child: Option<Child>,
    port: u16,
    /// Whether its processes run as the `postgres` user.
    as_postgres: bool,
    settings: Vec<(String, String)>,
    tls: Option<Arc<TlsCertificates>>,
    paused: AtomicBool,
    /// Whether its wall clock is read from its clock file (see [`PgServer::start_on_clock`]).
    faked: bool,
    // Last: removed once the server is gone.
    dir: tempfile::TempDir,
}

impl PgServer {
    /// A second loopback address the server listens on, which its TLS certificate does not name
    /// (the certificate names `localhost` and `127.0.0.1`).
    pub const UNNAMED_ADDRESS: &'static str = "127.0.0.2";
    /// The superuser, trusted (no password) over the Unix socket and loopback TCP.
    pub const SUPERUSER: &'static str = "postgres";
    /// A user authenticated by SCRAM-SHA-256.
    pub const SCRAM_USER: &'static str = "scram_user";
    /// [`PgServer::SCRAM_USER`]'s password.
    pub const SCRAM_PASSWORD: &'static str = "scram-Secret-1";
    /// A user authenticated by MD5 (its password stored as an MD5 hash).
    pub const MD5_USER: &'static str = "md5_user";
    /// [`PgServer::MD5_USER`]'s password.
    pub const MD5_PASSWORD: &'static str = "md5-Secret-2";
    /// A user whose password the server asks for in cleartext (the `password` method).
    pub const CLEARTEXT_USER: &'static str = "cleartext_user";
    /// [`PgServer::CLEARTEXT_USER`]'s password.
    pub const CLEARTEXT_PASSWORD: &'static str = "cleartext-Secret-3";

    /// A server with the default settings.
    pub fn start() -> PgServer {
        PgServer::start_with(PgOptions::default())
    }

    /// A server started as `options` say.
    pub fn start_with(options: PgOptions) -> PgServer {
        PgServer::start_as(options, None)
    }

    /// A server with the default settings whose wall clock stands still at `at` until
    /// [`PgServer::set_clock`] moves it, forward or back (libfaketime, Debian's `faketime`;
    /// its monotonic clock is left alone): `clock_timestamp()`, `now()` and every other reading
    /// of the time of day return the clock's time, to the microsecond. Restarts keep the clock.
    pub fn start_on_clock(at: std::time::SystemTime) -> PgServer {
        PgServer::start_as(PgOptions::default(), Some(at))
    }

    /// Moves the wall clock of a server started with [`PgServer::start_on_clock`] to `at`: the
    /// next reading returns it.
    pub fn set_clock(&self, at: std::time::SystemTime) {
        assert!(self.faked, "a server on its own clock");
        clock::set(&self.clock_file(), at);
    }

    fn clock_file(&self) -> PathBuf {
        self.dir.path().join("clock")
    }

    fn start_as(options: PgOptions, clock_at: Option<std::time::SystemTime>) -> PgServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let as_postgres = is_root();
        let tls = options.tls.as_ref().map(|tls| {
            tls.certificates
                .clone()
                .unwrap_or_else(|| Arc::new(TlsCertificates::generate()))
        });
        let mut server = PgServer {
            child: None,
            port: 0,
            as_postgres,
            settings: options.settings.clone(),
            tls,
            paused: AtomicBool::new(false),
            faked: clock_at.is_some(),
            dir,
        };
        if let Some(at) = clock_at {
            clock::set(&server.clock_file(), at);
        }
        server.init(options.tls.as_ref());
        for _ in 0..5 {
            server.port = crate::redis_server::free_port(None);
            if server.spawn() {
                server.create_users();
                return server;
            }
        }
        panic!("postgres did not start on any of 5 free ports");
    }

    /// A command running `program` of the server's, as the `postgres` user if need be.
    fn command(&self, program: &str) -> Command {
        crate::tied::command_as(
            &Path::new(BIN).join(program),
            self.as_postgres.then_some("postgres"),
        )
    }

    /// Starts the server on its port and waits until it answers; `false` if it exited because
    /// its port was taken. Any other exit fails the test with the server's log.
    fn spawn(&mut self) -> bool {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the server's log");
        let log_start = log.metadata().map(|meta| meta.len()).unwrap_or(0);
        let mut command = if self.faked {
            let mut command = crate::tied::command_as(
                Path::new("/usr/bin/env"),
                self.as_postgres.then_some("postgres"),
            );
            command
                .args(clock::env_args(&self.clock_file()))
                .arg(Path::new(BIN).join("postgres"));
            command
        } else {
            self.command("postgres")
        };
        command
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.dir.path())
            .arg("-c")
            .arg(format!(
                "listen_addresses=127.0.0.1,{}",
                Self::UNNAMED_ADDRESS
            ));
        if self.tls.is_some() {
            let tls = self.dir.path().join("tls");
            command.args(["-c", "ssl=on"]);
            for (setting, file) in [
                ("ssl_cert_file", "server.crt"),
                ("ssl_key_file", "server.key"),
                ("ssl_ca_file", "ca.crt"),
            ] {
                command
                    .arg("-c")
                    .arg(format!("{setting}={}", tls.join(file).display()));
            }
        }
        for (name, value) in &self.settings {
            command.arg("-c").arg(format!("{name}={value}"));
        }
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("share the log file"))
            .stderr(log);
        self.child = Some(crate::tied::spawn(command).expect("start postgres"));
        let deadline = Instant::now() + START_WITHIN;
        loop {
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                let log = self.log_since(log_start);
                if log.contains("Address already in use") {
                    return false;
                }
                panic!("postgres exited at start ({status}); its log:\n{log}");
            }
            match self.psql("SELECT 1") {
                Ok(_) => return true,
                Err(last) => assert!(
                    Instant::now() < deadline,
                    "postgres did not answer within {START_WITHIN:?}: {last}; its log:\n{}",
                    self.log_since(log_start)
                ),
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The password users, each with its password stored as its method needs.
    fn create_users(&self) {
        let sql = format!(
            "SET password_encryption = 'scram-sha-256'; \
             CREATE ROLE {} LOGIN PASSWORD '{}'; \
             CREATE ROLE {} LOGIN PASSWORD '{}'; \
             SET password_encryption = 'md5'; \
             CREATE ROLE {} LOGIN PASSWORD '{}'; \
             GRANT CREATE ON SCHEMA public TO PUBLIC;",
            Self::SCRAM_USER,
            Self::SCRAM_PASSWORD,
            Self::CLEARTEXT_USER,
            Self::CLEARTEXT_PASSWORD,
            Self::MD5_USER,
            Self::MD5_PASSWORD,
        );
        self.psql(&sql).expect("create the password users");
    }

    /// Runs `sql` as the superuser through the Unix socket (`psql`, killed after 10 s), and
    /// returns what it printed: rows unaligned, `|` between values, without headers.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let mut command = Command::new(Path::new(BIN).join("psql"));
        command
            .arg("-h")
            .arg(self.dir.path())
            .args(["-p", &self.port.to_string(), "-U", Self::SUPERUSER])
            .args(["-d", "postgres", "-X", "-A", "-t", "-q"])
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql]);
        crate::timed_run::output_within(command, "psql", Duration::from_secs(10))
    }

    /// Lets the password user [`PgServer::SCRAM_USER`] make schemas in the database (a new role
    /// may not, until granted), as a store that installs its own schema needs; panics if the
    /// grant fails.
    pub fn grant_schemas(&self) -> &PgServer {
        let grant = format!("GRANT CREATE ON DATABASE postgres TO {}", Self::SCRAM_USER);
        if let Err(error) = self.psql(&grant) {
            panic!("{} could not be granted CREATE: {error}", Self::SCRAM_USER);
        }
        self
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of the server's Unix socket (`.s.PGSQL.<port>` inside it).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// `postgres://user:password@127.0.0.1:port/postgres` (percent-encoding is not needed for
    /// the testkit's users and passwords).
    pub fn url_for(&self, user: &str, password: &str) -> String {
        format!(
            "postgres://{user}:{password}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// The superuser's URL over TCP: `postgres://postgres@127.0.0.1:port/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// [`PgServer::SCRAM_USER`]'s URL over TCP.
    pub fn scram_url(&self) -> String {
        self.url_for(Self::SCRAM_USER, Self::SCRAM_PASSWORD)
    }

    /// [`PgServer::MD5_USER`]'s URL over TCP.
    pub fn md5_url(&self) -> String {
        self.url_for(Self::MD5_USER, Self::MD5_PASSWORD)
    }

    /// The URL of `user` with `password` through the Unix socket (its directory
    /// percent-encoded as the host).
    pub fn unix_url_for(&self, user: &str, password: &str) -> String {
        let dir = self.dir.path().display().to_string().replace('/', "%2F");
        format!("postgres://{user}:{password}@{dir}:{}/postgres", self.port)
    }

    /// The certificates of a TLS server (the CA clients trust, a client certificate).
    pub fn tls_certificates(&self) -> Option<&TlsCertificates> {
        self.tls.as_deref()
    }

    /// The postmaster's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Freezes the server (SIGSTOP to the postmaster and every process it started): connections
    /// stay open, the kernel still accepts new ones, nothing answers.
    pub fn pause(&self) {
        let pid = self.pid().expect("a running server");
        signal("-STOP", pid);
        for child in children(pid) {
            signal("-STOP", child);
        }
        self.paused.store(true, Ordering::SeqCst);
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&self) {
        let pid = self.pid().expect("a running server");
        for child in children(pid) {
            signal("-CONT", child);
        }
        signal("-CONT", pid);
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Whether the server is paused by [`PgServer::pause`].
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Stops the server (its data kept): connections to its port are refused until
    /// [`PgServer::start_again`].
    pub fn stop(&mut self, how: Shutdown) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if self.is_paused() {
            self.paused.store(false, Ordering::SeqCst);
            for process in children(child.id()).into_iter().chain([child.id()]) {
                signal("-CONT", process);
            }
        }
        let how = match how {
            Shutdown::Fast => "-INT",
            Shutdown::Immediate => "-QUIT",
        };
        signal(how, child.id());
        let deadline = Instant::now() + START_WITHIN;
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the stopped server again on the same port, with its data (after an immediate
    /// shutdown, it recovers from the WAL first).
    pub fn start_again(&mut self) {
        if self.child.is_some() {
            return;
        }
        let deadline = Instant::now() + START_WITHIN;
        while !self.spawn() {
            assert!(
                Instant::now() < deadline,
                "postgres could not take its port {} again",
                self.port
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the server as `how` says and starts it again on the same port.
    pub fn restart(&mut self, how: Shutdown) {
        self.stop(how);
        self.start_again();
    }

    /// The file the server's log goes to, across restarts.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The last `lines` lines of the server's log, for a failure message.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let tail = all[all.len().saturating_sub(lines)..].join("\n");
        format!("\n--- log of postgres on port {} ---\n{tail}", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// What the log holds past byte `start` (its last 40 lines).
    fn log_since(&self, start: u64) -> String {
        let text = fs::read(self.log_path()).unwrap_or_default();
        let text = String::from_utf8_lossy(text.get(start as usize..).unwrap_or_default());
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop(Shutdown::Immediate);
    }
}

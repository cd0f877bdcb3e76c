//! A real PgBouncer for tests (Debian's `/usr/sbin/pgbouncer`) in front of a [`PgServer`], in
//! transaction pooling mode: each transaction may run on another server connection, so nothing
//! a session sets outlives its transaction. It listens on a free loopback port, authenticates
//! the server's password users by SCRAM-SHA-256, runs unprivileged (as `postgres` when the test
//! runs as root, which PgBouncer refuses) and is killed on drop.

use crate::PgServer;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Where Debian installs PgBouncer.
const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// A `pgbouncer` process, killed on drop.
pub struct PgBouncer {
    child: Option<Child>,
    port: u16,
    // Last: removed once the process is gone.
    dir: tempfile::TempDir,
}

impl PgBouncer {
    /// Starts PgBouncer in front of `server` in `pool_mode = transaction`, with up to 20 server
    /// connections per user and database, and waits until a query through it is answered.
    pub fn start(server: &PgServer) -> PgBouncer {
        PgBouncer::start_with_pool_size(server, 20)
    }

    /// Starts PgBouncer as [`PgBouncer::start`] does, with up to `pool_size` server connections
    /// per user and database: fewer than its clients makes them share server connections.
    pub fn start_with_pool_size(server: &PgServer, pool_size: u32) -> PgBouncer {
        let mut dir = tempfile::tempdir().expect("a temporary directory");
        let as_postgres = crate::postgres::is_root();
        let users = [
            (PgServer::SCRAM_USER, PgServer::SCRAM_PASSWORD),
            (PgServer::MD5_USER, PgServer::MD5_PASSWORD),
            (PgServer::CLEARTEXT_USER, PgServer::CLEARTEXT_PASSWORD),
        ];
        let userlist: String = users
            .iter()
            .map(|(user, password)| format!("\"{user}\" \"{password}\"\n"))
            .collect();
        fs::write(dir.path().join("userlist.txt"), userlist).expect("write the user list");
        for _ in 0..5 {
            let port = crate::redis_server::free_port(None);
            let ini = format!(
                "[databases]\n\
                 * = host=127.0.0.1 port={server_port}\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = scram-sha-256\n\
                 auth_file = {dir}/userlist.txt\n\
                 pool_mode = transaction\n\
                 max_client_conn = 200\n\
                 default_pool_size = {pool_size}\n\
                 server_login_retry = 1\n",
                server_port = server.port(),
                dir = dir.path().display(),
            );
            fs::write(dir.path().join("pgbouncer.ini"), ini).expect("write pgbouncer.ini");
            if as_postgres {
                let status = Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(dir.path())
                    .status()
                    .expect("run chown");
                assert!(status.success(), "chown -R postgres {:?}", dir.path());
            }
            let log = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.path().join("pgbouncer.log"))
                .expect("open the log");
            let mut command =
                crate::tied::command_as(Path::new(PGBOUNCER), as_postgres.then_some("postgres"));
            command
                .arg(dir.path().join("pgbouncer.ini"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("share the log file"))
                .stderr(log);
            let child = crate::tied::spawn(command).expect("start pgbouncer");
            let mut bouncer = PgBouncer {
                child: Some(child),
                port,
                dir,
            };
            if bouncer.wait_ready() {
                return bouncer;
            }
            bouncer.kill();
            dir = bouncer.take_dir();
        }
        panic!("pgbouncer did not start on any of 5 free ports");
    }

    /// Waits until a query through PgBouncer is answered; `false` if it exited because its port
    /// was taken. Any other exit fails the test with its log.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let exited = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                let log = fs::read_to_string(self.log_path()).unwrap_or_default();
                if log.contains("Address already in use") {
                    return false;
                }
                panic!("pgbouncer exited at start ({status}); its log:\n{log}");
            }
            let mut psql = Command::new("/usr/lib/postgresql/15/bin/psql");
            psql.env("PGPASSWORD", PgServer::SCRAM_PASSWORD)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", PgServer::SCRAM_USER, "-d", "postgres"])
                .args(["-X", "-A", "-t", "-q", "-c", "SELECT 1"]);
            match crate::timed_run::output_within(psql, "psql", Duration::from_secs(5)) {
                Ok(_) => return true,
                Err(last) => assert!(
                    Instant::now() < deadline,
                    "pgbouncer did not answer within 30 s: {last}; its log:\n{}",
                    fs::read_to_string(self.log_path()).unwrap_or_default()
                ),
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://user:password@127.0.0.1:port/postgres` through PgBouncer (for the server's
    /// password users).
    pub fn url_for(&self, user: &str, password: &str) -> String {
        format!(
            "postgres://{user}:{password}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// [`PgServer::SCRAM_USER`]'s URL through PgBouncer.
    pub fn scram_url(&self) -> String {
        self.url_for(PgServer::SCRAM_USER, PgServer::SCRAM_PASSWORD)
    }

    /// The file PgBouncer logs to.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("pgbouncer.log")
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The directory, from a bouncer that did not start, for the next try.
    fn take_dir(mut self) -> tempfile::TempDir {
        self.kill();
        let placeholder = tempfile::tempdir().expect("a temporary directory");
        std::mem::replace(&mut self.dir, placeholder)
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.kill();
    }
}

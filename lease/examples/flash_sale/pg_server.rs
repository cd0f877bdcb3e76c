//! A throwaway PostgreSQL server for `--db postgres`: Debian's `postgresql` package, a fresh
//! cluster in a temporary directory, on a free loopback port, stopped on drop. Run as the
//! `postgres` user (through `runuser`) when this program runs as root, which PostgreSQL refuses.

use super::store::Result;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running throwaway server.
pub struct PgServer {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    as_postgres: bool,
    server: Child,
    // Last: removed after the server has stopped.
    _dir: tempfile::TempDir,
}

impl PgServer {
    /// Makes a cluster and starts its server.
    pub fn start() -> Result<PgServer> {
        let bin = binaries()?;
        let dir = tempfile::tempdir()?;
        let as_postgres = is_root()?;
        if as_postgres {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path()))?;
        }
        let data = dir.path().join("data");
        run(command(as_postgres, &bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]))?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = fs::File::create(dir.path().join("server.log"))?;
        let server = command(as_postgres, &bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            // Like the SQLite file's `synchronous = NORMAL`: a commit does not wait for its
            // WAL to reach the disk.
            .args(["-c", "synchronous_commit=off"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start postgres: {e}"))?;
        let server = PgServer {
            bin,
            data,
            port,
            as_postgres,
            server,
            _dir: dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while postgres::Client::connect(&server.url(), postgres::NoTls).is_err() {
            if Instant::now() > deadline {
                return Err(format!("postgres did not accept connections on port {port}").into());
            }
            thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// The URL of its `postgres` database, as the `postgres` user.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = command(self.as_postgres, &self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["stop", "-m", "immediate"])
            .stdout(Stdio::null())
            .status();
        let _ = self.server.wait();
    }
}

/// The newest installed server's `bin` directory.
fn binaries() -> Result<PathBuf> {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir(root)
        .map_err(|_| "PostgreSQL is not installed (apt-get install postgresql)")?
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let version = path.file_name()?.to_str()?.parse().ok()?;
            path.join("bin/postgres")
                .exists()
                .then_some((version, path.join("bin")))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "PostgreSQL is not installed (apt-get install postgresql)".into())
}

fn is_root() -> Result<bool> {
    let output = Command::new("id").arg("-u").output()?;
    Ok(String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// `program`, run as the `postgres` user if `as_postgres`.
fn command(as_postgres: bool, program: &Path) -> Command {
    if as_postgres {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run(command: &mut Command) -> Result<()> {
    let output = command.output()?;
    if !output.status.success() {
        return Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(())
}

//! A server's cluster before its first start: `initdb`, the authentication rules
//! (`pg_hba.conf`) for the superuser and the password users, and the TLS files, all owned by the
//! `postgres` user when the server runs as it.

use super::{PgServer, PgTls};
use std::fs;
use std::path::Path;
use std::process::Command;

impl PgServer {
    /// The cluster: `initdb`, the authentication rules, and the TLS files.
    pub(super) fn init(&self, tls: Option<&PgTls>) {
        if self.as_postgres {
            self.chown();
        }
        let initdb = self
            .command("initdb")
            .arg("-D")
            .arg(self.data())
            .args(["-A", "trust", "-U", Self::SUPERUSER, "-E", "UTF8"])
            .args(["--locale=C", "--no-sync", "--no-instructions"])
            .output()
            .expect("run initdb");
        assert!(
            initdb.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let mut rules = String::from(
            "local all postgres trust\n\
             local all md5_user md5\n\
             local all cleartext_user password\n\
             local all all scram-sha-256\n",
        );
        let tcp = "127.0.0.0/8";
        if let Some(tls) = tls {
            let clientcert = if tls.client_certificates {
                " clientcert=verify-ca"
            } else {
                ""
            };
            rules += &format!(
                "hostssl all postgres {tcp} trust{clientcert}\n\
                 hostssl all md5_user {tcp} md5{clientcert}\n\
                 hostssl all cleartext_user {tcp} password{clientcert}\n\
                 hostssl all all {tcp} scram-sha-256{clientcert}\n"
            );
            let certificates = self.tls.as_ref().expect("certificates");
            let tls_dir = self.dir.path().join("tls");
            fs::create_dir_all(&tls_dir).expect("a TLS directory");
            for (from, to) in [
                (certificates.server_cert(), "server.crt"),
                (certificates.server_key(), "server.key"),
                (certificates.ca_cert(), "ca.crt"),
            ] {
                fs::copy(from, tls_dir.join(to)).expect("copy a certificate");
            }
            set_mode(&tls_dir.join("server.key"), 0o600);
        }
        if tls.is_none_or(|tls| !tls.required) {
            rules += &format!(
                "host all postgres {tcp} trust\n\
                 host all md5_user {tcp} md5\n\
                 host all cleartext_user {tcp} password\n\
                 host all all {tcp} scram-sha-256\n"
            );
        }
        fs::write(self.data().join("pg_hba.conf"), rules).expect("write pg_hba.conf");
        if self.as_postgres {
            self.chown();
        }
    }

    /// Gives the directory to the `postgres` user.
    fn chown(&self) {
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(self.dir.path())
            .status()
            .expect("run chown");
        assert!(status.success(), "chown -R postgres {:?}", self.dir.path());
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("set a file's mode");
}

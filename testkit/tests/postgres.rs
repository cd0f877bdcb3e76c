//! The throwaway PostgreSQL server and PgBouncer, checked with `psql`: the password users, TLS,
//! settings, freezing, restarts that keep the data, and PgBouncer in front.

use std::process::Command;
use std::time::{Duration, Instant};
use testkit::{PgBouncer, PgOptions, PgServer, PgTls, Shutdown};

/// `psql` with `conninfo` (a URL or `key=value` pairs) running `sql`, killed after 10 s.
fn psql(conninfo: &str, sql: &str) -> Result<String, String> {
    let mut child = Command::new("/usr/lib/postgresql/15/bin/psql")
        .args([conninfo, "-X", "-A", "-t", "-q", "-c", sql])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start psql");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("wait for psql").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("psql killed after 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().expect("psql's output");
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if output.status.success() {
        Ok(text)
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn each_password_user_logs_in_by_its_own_method() {
    let pg = PgServer::start();
    let methods = pg
        .psql("SELECT rolname, left(rolpassword, 3) FROM pg_authid WHERE rolpassword IS NOT NULL ORDER BY 1")
        .expect("psql");
    assert_eq!(
        methods.trim(),
        "cleartext_user|SCR\nmd5_user|md5\nscram_user|SCR"
    );
    for url in [pg.scram_url(), pg.md5_url()] {
        assert_eq!(psql(&url, "SELECT 1").as_deref(), Ok("1"), "{url}");
    }
    let wrong = pg.url_for(PgServer::SCRAM_USER, "wrong");
    let refused = psql(&wrong, "SELECT 1").expect_err("a wrong password");
    assert!(
        refused.contains("password authentication failed"),
        "{refused}"
    );
    let unix = pg.unix_url_for(PgServer::MD5_USER, PgServer::MD5_PASSWORD);
    assert_eq!(psql(&unix, "SELECT 1").as_deref(), Ok("1"));
}

#[test]
fn settings_pass_through_and_a_restart_keeps_the_data() {
    let mut pg = PgServer::start_with(PgOptions {
        tls: None,
        settings: vec![("synchronous_commit".into(), "off".into())],
    });
    assert_eq!(
        pg.psql("SHOW synchronous_commit").expect("psql").trim(),
        "off"
    );
    pg.psql("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)")
        .expect("psql");
    for how in [Shutdown::Fast, Shutdown::Immediate] {
        pg.restart(how);
        assert_eq!(
            pg.psql("SELECT n FROM kept").expect("psql").trim(),
            "7",
            "{how:?}"
        );
    }
    pg.stop(Shutdown::Fast);
    assert!(pg.psql("SELECT 1").is_err(), "stopped");
    pg.start_again();
    assert_eq!(
        pg.psql("SHOW synchronous_commit").expect("psql").trim(),
        "off"
    );
}

#[test]
fn a_paused_server_answers_nothing_until_resumed() {
    let pg = PgServer::start();
    pg.pause();
    assert!(pg.is_paused());
    let started = Instant::now();
    assert!(psql(&pg.scram_url(), "SELECT 1").is_err(), "frozen");
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "psql waited until killed"
    );
    pg.resume();
    assert_eq!(psql(&pg.scram_url(), "SELECT 1").as_deref(), Ok("1"));
}

#[test]
fn a_tls_server_refuses_plain_tcp_and_presents_a_certificate_of_the_ca() {
    let pg = PgServer::start_with(PgOptions {
        tls: Some(PgTls {
            required: true,
            ..PgTls::default()
        }),
        settings: Vec::new(),
    });
    let ca = pg.tls_certificates().expect("TLS").ca_cert();
    let verified = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        pg.scram_url(),
        ca.display()
    );
    assert_eq!(
        psql(
            &verified,
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
        )
        .as_deref(),
        Ok("t")
    );
    let plain = format!("{}?sslmode=disable", pg.scram_url());
    let refused = psql(&plain, "SELECT 1").expect_err("plain TCP");
    assert!(refused.contains("no encryption"), "{refused}");
}

#[test]
fn pgbouncer_passes_transactions_on_to_the_server() {
    let pg = PgServer::start();
    let bouncer = PgBouncer::start(&pg);
    let port = psql(&bouncer.scram_url(), "SHOW port").expect("through PgBouncer");
    assert_eq!(port, pg.port().to_string());
    assert!(bouncer.log_path().exists());
}

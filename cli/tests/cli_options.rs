//! The tool's options borrowed from flock(1) and its kin: `-c`, `-E`, `--max-hold`, `status`'s
//! exit code, client certificates, and `$RUST_LOG`.

mod tool;

use std::fs;
use std::time::{Duration, Instant};
use testkit::{ClientAuth, RedisServer, TlsOptions};
use tool::{finish, lease, output, scratch, spawn, stderr_of};

const USAGE: i32 = 64;
const REFUSED: i32 = 78;
const LOST: i32 = 79;

#[test]
fn status_exits_0_when_held_and_1_when_free() {
    let server = RedisServer::start();
    let url = server.url();
    let free = output(lease(&url).args(["status", "job"]));
    assert_eq!(free.status.code(), Some(1), "{free:?}");
    let holder = spawn(lease(&url).args(["run", "job", "--", "sleep", "2"]));
    std::thread::sleep(Duration::from_millis(600));
    for args in [&["status", "job"][..], &["status", "--json", "job"]] {
        let held = output(lease(&url).args(args));
        assert_eq!(held.status.code(), Some(0), "{args:?}: {held:?}");
    }
    let done = finish(holder, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
}

#[test]
fn a_shell_command_runs_with_dash_c() {
    let server = RedisServer::start();
    let (_dir, file) = scratch("token");
    let script = format!("echo \"$LEASE_NAME $LEASE_TOKEN\" > {}", file.display());
    let done = output(lease(&server.url()).args(["run", "job", "-c", &script]));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    assert_eq!(fs::read_to_string(&file).expect("written").trim(), "job 1");
    let both = output(lease(&server.url()).args(["run", "job", "-c", "true", "--", "true"]));
    assert_eq!(both.status.code(), Some(USAGE), "{both:?}");
    let neither = output(lease(&server.url()).args(["run", "job"]));
    assert_eq!(neither.status.code(), Some(USAGE), "{neither:?}");
}

#[test]
fn a_conflict_exits_with_the_code_of_dash_e() {
    let server = RedisServer::start();
    let url = server.url();
    let holder = spawn(lease(&url).args(["run", "job", "--", "sleep", "2"]));
    std::thread::sleep(Duration::from_millis(600));
    for (code, expected) in [(None, 75), (Some("0"), 0), (Some("3"), 3)] {
        let mut command = lease(&url);
        command.args(["run", "--wait", "0"]);
        if let Some(code) = code {
            command.args(["-E", code]);
        }
        let done = output(command.args(["job", "--", "echo", "never"]));
        assert_eq!(done.status.code(), Some(expected), "{code:?}: {done:?}");
        assert!(done.stdout.is_empty(), "the command never ran: {done:?}");
    }
    let done = finish(holder, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
}

#[test]
fn max_hold_stops_a_job_that_hangs() {
    let server = RedisServer::start();
    let started = Instant::now();
    let done = output(lease(&server.url()).args([
        "--lease",
        "600ms",
        "run",
        "--max-hold",
        "1s",
        "--kill-grace",
        "100ms",
        "job",
        "--",
        "sleep",
        "30",
    ]));
    assert_eq!(done.status.code(), Some(LOST), "{}", stderr_of(&done));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stopped within the bound: {:?}",
        started.elapsed()
    );
    let bad = output(lease(&server.url()).args(["run", "--max-hold", "0s", "job", "--", "true"]));
    assert_eq!(bad.status.code(), Some(USAGE), "{bad:?}");
}

#[test]
fn a_server_that_requires_a_client_certificate_gets_one_from_the_flags() {
    let server = RedisServer::start_tls(TlsOptions {
        client_auth: ClientAuth::Required,
        ..TlsOptions::default()
    });
    let certs = server.tls_certificates().expect("a TLS server").clone();
    let ca = certs.ca_cert().display().to_string();
    let base = || {
        let mut command = lease(&server.url());
        command.args(["--tls-ca-file", &ca]);
        command
    };
    let without = output(base().args(["status", "job"]));
    assert_eq!(without.status.code(), Some(REFUSED), "{without:?}");
    let with = output(base().args([
        "--tls-cert",
        &certs.client_cert().display().to_string(),
        "--tls-key",
        &certs.client_key().display().to_string(),
        "status",
        "job",
    ]));
    assert_eq!(with.status.code(), Some(1), "free: {}", stderr_of(&with));
    let half = output(base().args([
        "--tls-cert",
        &certs.client_cert().display().to_string(),
        "status",
        "job",
    ]));
    assert_eq!(half.status.code(), Some(USAGE), "{half:?}");
}

#[test]
fn rust_log_filters_the_log_when_lease_log_is_unset() {
    let server = RedisServer::start();
    let debug = output(
        lease(&server.url())
            .env("RUST_LOG", "debug")
            .args(["status", "x"]),
    );
    assert!(stderr_of(&debug).contains(" debug "), "{debug:?}");
    let overridden = output(
        lease(&server.url())
            .env("RUST_LOG", "debug")
            .env("LEASE_LOG", "warn")
            .args(["status", "x"]),
    );
    assert_eq!(stderr_of(&overridden), "", "{overridden:?}");
}

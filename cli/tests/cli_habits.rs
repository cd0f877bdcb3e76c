//! Habits from flock(1) and `test`: `-w` with a bare number of seconds, `-n` to try once, help
//! that keeps a command's own options apart from the connection's, and `lease status` codes that
//! tell "free" from "neither held nor usable", a semaphore shown as one without `--permits`.

mod tool;

use redis_lease::redis::Commands;
use std::time::{Duration, Instant};
use testkit::RedisServer;
use tool::{finish, lease, output, spawn, stderr_of, stdout_of};

const NOT_ACQUIRED: i32 = 75;
const DATA: i32 = 65;

#[test]
fn w_takes_bare_seconds_and_n_tries_once() {
    let server = RedisServer::start();
    let holder = spawn(lease(&server.url()).args(["run", "job", "--", "sleep", "3"]));
    testkit::wait_until("the holder holds", Duration::from_secs(10), || {
        output(lease(&server.url()).args(["status", "job"]))
            .status
            .code()
            == Some(0)
    });
    let started = Instant::now();
    let waited = output(lease(&server.url()).args(["run", "-w", "0.5", "job", "--", "true"]));
    assert_eq!(
        waited.status.code(),
        Some(NOT_ACQUIRED),
        "{}",
        stderr_of(&waited)
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let tried = output(lease(&server.url()).args(["run", "-n", "job", "--", "true"]));
    assert_eq!(
        tried.status.code(),
        Some(NOT_ACQUIRED),
        "{}",
        stderr_of(&tried)
    );
    let both = output(lease(&server.url()).args(["run", "-n", "-w", "5", "job", "--", "true"]));
    assert_eq!(both.status.code(), Some(64), "-n and -w exclude each other");
    let done = finish(holder, Duration::from_secs(10));
    assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    let free = output(lease(&server.url()).args(["run", "-w", "10", "job", "--", "true"]));
    assert_eq!(free.status.code(), Some(0), "{}", stderr_of(&free));
}

#[test]
fn run_help_keeps_its_own_options_apart_from_the_connection_options() {
    let help = output(lease("redis://127.0.0.1:1").args(["run", "--help"]));
    let text = stdout_of(&help);
    let (own, rest) = text
        .split_once("Connection options (every command)")
        .unwrap_or_else(|| panic!("no heading:\n{text}"));
    for flag in [
        "--wait",
        "--nonblock",
        "--kill-grace",
        "--permits",
        "--value",
    ] {
        assert!(own.contains(flag), "{flag} not among run's own:\n{text}");
    }
    assert!(rest.contains("--url") && !own.contains("--url"), "{text}");
    assert!(text.contains("Output (every command)"), "{text}");
}

#[test]
fn status_tells_free_from_neither_and_reads_a_semaphore_as_one() {
    let server = RedisServer::start();
    let holders: Vec<_> = (0..2)
        .map(|_| {
            spawn(lease(&server.url()).args([
                "run",
                "--permits",
                "2",
                "exports",
                "--",
                "sleep",
                "3",
            ]))
        })
        .collect();
    testkit::wait_until("both permits are held", Duration::from_secs(10), || {
        let status = output(lease(&server.url()).args(["status", "--permits", "2", "exports"]));
        stdout_of(&status).contains("2 of 2 permits held")
    });
    let status = output(lease(&server.url()).args(["status", "exports"]));
    let text = stdout_of(&status);
    assert_eq!(status.status.code(), Some(0), "{text}");
    assert!(
        text.contains("(semaphore)") && text.contains("2 of 2 permits held"),
        "{text}"
    );
    for holder in holders {
        finish(holder, Duration::from_secs(10));
    }
    let free = output(lease(&server.url()).args(["status", "nothing-here"]));
    assert_eq!(free.status.code(), Some(1), "{}", stdout_of(&free));
    let mut con = server.connection();
    let _: () = con.set("{odd}", "a string").expect("SET");
    let neither = output(lease(&server.url()).args(["status", "odd"]));
    assert_eq!(neither.status.code(), Some(DATA), "{}", stdout_of(&neither));
    let _: () = con.set("{worn}:fence", i64::MAX).expect("SET");
    let worn = output(lease(&server.url()).args(["status", "worn", "--json"]));
    assert_eq!(worn.status.code(), Some(DATA), "{}", stdout_of(&worn));
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&worn)).expect("json");
    assert_eq!(json["last_token"].as_u64(), Some(i64::MAX as u64), "{json}");
    assert_eq!(json["tokens_exhausted"], true, "{json}");
}

//! A plain testkit server: reached through its unix socket too, and a start that fails says why.

use testkit::RedisServer;

#[test]
fn a_server_is_reached_through_its_unix_socket() {
    let server = RedisServer::start();
    let mut con = redis::Client::open(server.unix_url())
        .expect("a unix URL")
        .get_connection()
        .expect("connect through the unix socket");
    let pong: String = redis::cmd("PING").query(&mut con).expect("PING");
    assert_eq!(pong, "PONG");
}

#[test]
#[should_panic(expected = "Bad directive or wrong number of arguments")]
fn a_server_that_exits_at_start_fails_the_test_with_its_log() {
    let _ = RedisServer::start_with(&["--no-such-setting", "1"]);
}

/// The child half of the test below: starts a server, says its port, and waits to be killed.
#[test]
fn server_owner_entry() {
    if std::env::var_os("TESTKIT_OWNER_CHILD").is_none() {
        return;
    }
    let server = RedisServer::start();
    use std::io::Write;
    let mut out = std::io::stdout();
    writeln!(out, "port {}", server.port()).expect("the parent reads");
    out.flush().expect("the parent reads");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn a_server_dies_with_the_process_that_started_it_even_one_killed_outright() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "server_owner_entry", "--nocapture"])
        .env("TESTKIT_OWNER_CHILD", "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("piped");
    let port: u16 = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("port ")?.trim().parse().ok())
        .expect("the child says its server's port");
    let url = format!("redis://127.0.0.1:{port}");
    let ping = || {
        redis::Client::open(url.as_str())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_millis(500)))
            .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con))
            .is_ok()
    };
    assert!(ping(), "the child's server answers");
    child.kill().expect("SIGKILL the child");
    child.wait().expect("reaped");
    let deadline = Instant::now() + Duration::from_secs(10);
    while ping() {
        assert!(
            Instant::now() < deadline,
            "the server outlived the process that started it"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

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

//! ACL users on a testkit server: limited to their key pattern, logged in through a URL, and kept
//! across a restart.

use redis::Commands;
use testkit::{RedisServer, TlsOptions};

fn set_as(url: &str, key: &str) -> redis::RedisResult<()> {
    redis::Client::open(url)?.get_connection()?.set(key, "1")
}

#[test]
fn an_acl_user_may_touch_only_its_key_pattern_and_survives_a_restart() {
    let mut server = RedisServer::start();
    server.acl_setuser("locker", &["on", ">pw:1", "resetkeys", "~lock:*", "+@all"]);
    let url = server.url_as("locker", "pw:1");
    assert_eq!(
        url,
        format!("redis://locker:pw%3A1@127.0.0.1:{}", server.port())
    );

    set_as(&url, "lock:{a}").expect("a key of its pattern");
    let refused = set_as(&url, "other").expect_err("a key outside its pattern");
    assert_eq!(refused.code(), Some("NOPERM"), "{refused}");
    set_as(&server.url_as("locker", "nope"), "lock:{a}").expect_err("a wrong password");

    server.restart();
    set_as(&url, "lock:{b}").expect("the user after a restart");
}

#[test]
fn an_acl_user_logs_in_over_tls() {
    let server = RedisServer::start_tls(TlsOptions::default());
    server.acl_setuser("locker", &["on", ">pw", "~lock:*", "+@all"]);
    assert_eq!(
        server.url_as("locker", "pw"),
        format!("rediss://locker:pw@127.0.0.1:{}", server.port())
    );
    let whoami = server
        .cli(&["--user", "locker", "--pass", "pw", "ACL", "WHOAMI"])
        .expect("ACL WHOAMI over TLS");
    assert_eq!(whoami, "locker\n");
}

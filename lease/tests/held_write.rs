//! Writes made only while a hold holds (`LeaseGuard::if_held`) on Redis: one server, a Cluster
//! (keys in the lock's hash tag, others refused), a hold lapsed in the store while its holder
//! still believes it holds (its watchdog's clock stopped), the caller's script errors, replica
//! acknowledgements, and RedLock, which refuses them.

mod common;

use common::held_write::*;
use redis::{Commands, Value};
use redis_lease::{Client, Error, Write, Written};
use std::time::Duration;
use testkit::{RedisCluster, RedisServer};

/// Appends `entry` to `{name}:log` and counts it in `{name}:count`; replies with the count.
fn append(name: &str, entry: &str) -> Write {
    Write::Lua {
        script: "redis.call('rpush', KEYS[1], ARGV[1])\nreturn redis.call('incr', KEYS[2])".into(),
        keys: vec![format!("{{{name}}}:log"), format!("{{{name}}}:count")],
        args: vec![entry.into()],
    }
}

fn count_of(written: &Written) -> Option<u64> {
    match written {
        Written::Lua(Value::Int(count)) => u64::try_from(*count).ok(),
        _ => None,
    }
}

/// The log of `name` and its count, on `con`.
fn read(con: &mut redis::Connection, name: &str) -> (Vec<String>, u64) {
    let entries: Vec<String> = con
        .lrange(format!("{{{name}}}:log"), 0, -1)
        .expect("LRANGE");
    let count: Option<u64> = con.get(format!("{{{name}}}:count")).expect("GET");
    (entries, count.unwrap_or(0))
}

#[test]
fn writes_are_made_only_while_the_hold_holds_on_one_server() {
    let server = RedisServer::start();
    let clients = |lease| common::client_with_lease(&server, lease);
    let read = |name: &str| read(&mut server.connection(), name);
    let log = Log {
        append: &append,
        read: &read,
        count_of,
    };
    writes_are_made_only_while_the_hold_holds(&clients, &log, "stock");
    writes_while_held_follow_the_holds_in_token_order(&clients, &log, "ordered");
}

#[test]
fn a_hold_lapsed_in_the_store_writes_nothing_though_its_holder_believes_it_holds() {
    let server = RedisServer::start();
    // The watchdog's clock stands still: the guard never finds its hold lost by itself.
    let (stopped, _clock, _timer) = common::manual_client(&server, Duration::from_secs(1));
    let lease = Duration::from_millis(200);
    let guard = stopped
        .lock("sale")
        .expect("valid")
        .with_lease(lease)
        .lock()
        .expect("free");
    common::wait_until("the lease lapsed in Redis", || {
        let exists: bool = server.connection().exists("{sale}").expect("EXISTS");
        !exists
    });
    assert!(!guard.is_lost(), "its holder believes it holds");
    let outcome = guard.if_held(&append("sale", "late"));
    assert!(
        matches!(outcome, Err(Error::NotOwner { .. })),
        "{outcome:?}"
    );
    let next = common::client(&server)
        .lock("sale")
        .expect("valid")
        .lock()
        .expect("free");
    let outcome = guard.if_held(&append("sale", "later"));
    assert!(
        matches!(outcome, Err(Error::NotOwner { .. })),
        "{outcome:?}"
    );
    next.if_held(&append("sale", "next")).expect("held");
    assert_eq!(
        read(&mut server.connection(), "sale"),
        (vec!["next".into()], 1)
    );
}

#[test]
fn the_callers_script_replies_and_fails_as_its_own() {
    let server = RedisServer::start();
    let client = common::client(&server);
    let guard = client.lock("box").expect("valid").lock().expect("free");
    let script = |script: &str| Write::Lua {
        script: script.into(),
        keys: vec!["{box}:a".into()],
        args: vec!["x".into(), "y".into()],
    };
    // Its KEYS and ARGV are its own; its reply is what it returns, whatever its shape.
    let written = guard
        .if_held(&script("return {KEYS[1], ARGV[1], ARGV[2], #KEYS, #ARGV}"))
        .expect("held");
    assert_eq!(
        written,
        Written::Lua(Value::Array(vec![
            Value::BulkString(b"{box}:a".to_vec()),
            Value::BulkString(b"x".to_vec()),
            Value::BulkString(b"y".to_vec()),
            Value::Int(1),
            Value::Int(2),
        ]))
    );
    assert_eq!(
        guard.if_held(&script("-- nothing")).expect("held"),
        Written::Lua(Value::Nil)
    );
    // An error it returns or raises is the call's; one it makes before writing writes nothing.
    let refused = guard
        .if_held(&script("return redis.error_reply('SOLDOUT nothing left')"))
        .expect_err("its error");
    assert_eq!(refused.code(), Some("SOLDOUT"), "{refused}");
    let raised = guard.if_held(&script("redis.call('incr', ARGV[1], 'one too many')"));
    assert!(matches!(raised, Err(Error::Refused { .. })), "{raised:?}");
    let broken = guard.if_held(&script("return ("));
    assert!(matches!(broken, Err(Error::Refused { .. })), "{broken:?}");
    let wrong = guard.if_held(&script("return redis.call('incr', KEYS[1])"));
    assert_eq!(wrong.expect("held"), Written::Lua(Value::Int(1)));
    // A hold key that is not a lock's is refused before the write.
    let () = server.connection().set("{box}", "x").expect("SET");
    let outcome = guard.if_held(&script("return redis.call('incr', KEYS[1])"));
    assert!(
        matches!(outcome, Err(Error::WrongType { .. })),
        "{outcome:?}"
    );
    let count: i64 = server.connection().get("{box}:a").expect("GET");
    assert_eq!(count, 1, "nothing written after the refusal");
    // A script the server lost (a restart, SCRIPT FLUSH) is loaded again.
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.connection())
        .expect("SCRIPT FLUSH");
    let () = server.connection().del("{box}").expect("DEL");
    drop(guard);
    let guard = client.lock("box").expect("valid").lock().expect("free");
    assert_eq!(
        guard
            .if_held(&script("return redis.call('incr', KEYS[1])"))
            .expect("held"),
        Written::Lua(Value::Int(2))
    );
}

#[test]
fn a_write_no_replica_acknowledges_is_made_and_says_so() {
    let (primary, replica) = (RedisServer::start(), RedisServer::start());
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port())
        .query(&mut replica.connection())
        .expect("REPLICAOF");
    let client = Client::builder(primary.url())
        .replica_acks(1, Duration::from_millis(200))
        .build()
        .expect("valid settings");
    let lock = client.lock("acked").expect("valid");
    let guard = common::retried_while_unavailable(Duration::from_secs(10), || lock.lock());
    let written = guard
        .if_held(&append("acked", "one"))
        .expect("acknowledged");
    assert_eq!(count_of(&written), Some(1));
    replica.pause();
    let unacknowledged = guard.if_held(&append("acked", "two"));
    replica.resume();
    assert!(
        matches!(
            unacknowledged,
            Err(Error::NotReplicated {
                acked: 0,
                wanted: 1,
                ..
            })
        ),
        "{unacknowledged:?}"
    );
    assert_eq!(
        read(&mut primary.connection(), "acked"),
        (vec!["one".into(), "two".into()], 2),
        "made on the primary all the same"
    );
}

#[test]
fn writes_are_refused_on_redlock_and_out_of_the_locks_slot_on_a_cluster() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let redlock = Client::redlock(servers.iter().map(RedisServer::url))
        .build()
        .expect("valid settings");
    let guard = redlock.lock("sale").expect("valid").lock().expect("free");
    let refused = guard.if_held(&append("sale", "x"));
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(why)) if why.contains("not offered")),
        "{refused:?}"
    );
    guard.unlock().expect("held");

    let cluster = RedisCluster::start(3, 0);
    let clients = |lease| {
        Client::cluster(cluster.seed_urls())
            .default_lease(lease)
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("valid settings")
    };
    let read = |name: &str| {
        let master = cluster.master_for_key(format!("{{{name}}}"));
        read(&mut cluster.server(master).connection(), name)
    };
    let log = Log {
        append: &append,
        read: &read,
        count_of,
    };
    writes_are_made_only_while_the_hold_holds(&clients, &log, "stock");
    let guard = clients(Duration::from_secs(5))
        .lock("stock")
        .expect("valid")
        .lock()
        .expect("free");
    let elsewhere = Write::Lua {
        script: "return redis.call('incr', KEYS[1])".into(),
        keys: vec!["stock:count".into()],
        args: vec![],
    };
    let refused = guard.if_held(&elsewhere);
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(why)) if why.contains("hash tag")),
        "{refused:?}"
    );
}

//! A Sentinel-managed primary started by testkit: a failover on request changes the primary, a
//! write the primary acknowledged while the replica was paused is lost when the primary dies, and
//! a primary frozen past the Sentinels' patience comes back as a replica of the new one.

use redis::Commands;
use testkit::SentinelSet;

fn get(set: &SentinelSet, port: u16, key: &str) -> Option<String> {
    set.server(port).connection().get(key).expect("GET")
}

fn role(set: &SentinelSet, port: u16) -> String {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut set.server(port).connection())
        .expect("INFO replication");
    info.lines()
        .find_map(|line| line.strip_prefix("role:"))
        .expect("a role")
        .trim()
        .to_owned()
}

#[test]
fn a_sentinel_failover_changes_the_primary() {
    let set = SentinelSet::start();
    assert_eq!(set.sentinel_urls().len(), 3);
    let old = set.primary();
    let replica = set.replica();
    let () = set.server(old).connection().set("k", "kept").expect("SET");
    set.wait_replicated();
    let new = set.failover();
    assert_eq!(new, replica);
    assert_eq!(set.primary(), new);
    assert_eq!(set.replica(), old);
    assert_eq!(role(&set, new), "master");
    assert_eq!(role(&set, old), "slave");
    assert_eq!(get(&set, new, "k").as_deref(), Some("kept"));
}

#[test]
fn a_write_acknowledged_while_the_replica_is_paused_is_lost_when_the_primary_dies() {
    let mut set = SentinelSet::start();
    let old = set.primary();
    let replica = set.replica();
    let () = set
        .server(old)
        .connection()
        .set("before", "1")
        .expect("SET");
    set.wait_replicated();

    set.pause_replica();
    let token: i64 = set.server(old).connection().incr("token", 1).expect("INCR");
    assert_eq!(token, 1);
    let killed = set.kill_primary();
    assert_eq!(killed, old);
    set.resume_replica();
    let new = set.wait_primary_changed(old);
    assert_eq!(new, replica);
    assert_eq!(get(&set, new, "before").as_deref(), Some("1"));
    assert_eq!(
        get(&set, new, "token"),
        None,
        "the unreplicated INCR is lost"
    );

    set.start_again(old);
    set.wait_replicated();
    assert_eq!(role(&set, old), "slave");
    assert_eq!(get(&set, old, "before").as_deref(), Some("1"));
}

#[test]
fn a_frozen_primary_is_failed_over_and_comes_back_as_a_replica_with_the_new_data() {
    let set = SentinelSet::start();
    let replica = set.replica();
    let () = set
        .server(set.primary())
        .connection()
        .set("k", "old")
        .expect("SET");
    set.wait_replicated();

    let old = set.freeze_primary();
    assert_eq!(set.wait_primary_changed(old), replica);
    let () = set
        .server(replica)
        .connection()
        .set("k", "new")
        .expect("SET");
    set.server(old).resume();
    set.wait_replicated();
    assert_eq!(role(&set, old), "slave");

    let copies = set.with_writes_paused(|primary, replica| {
        let get = |server: &testkit::RedisServer| -> Option<String> {
            server.connection().get("k").expect("GET")
        };
        (get(primary), get(replica))
    });
    assert_eq!(copies, (Some("new".into()), Some("new".into())));
    let () = set
        .server(replica)
        .connection()
        .set("k", "written after the pause")
        .expect("writes go on after the look");
}

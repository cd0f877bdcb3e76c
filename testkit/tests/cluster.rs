//! A Redis Cluster started by testkit: it comes up ok, routes keys as Redis does, fails a replica
//! over, moves a slot, and replaces a paused or killed master.

use redis::Commands;
use testkit::{slot, Failover, Lcg, RedisCluster, Role, SLOTS};

fn get(cluster: &RedisCluster, port: u16, key: &str) -> redis::RedisResult<Option<String>> {
    cluster.server(port).connection().get(key)
}

#[test]
fn a_cluster_comes_up_ok_and_slot_agrees_with_cluster_keyslot() {
    let cluster = RedisCluster::start(3, 1);

    let nodes = cluster.nodes();
    assert_eq!(nodes.len(), 6);
    assert_eq!(cluster.seed_urls().len(), 6);
    let served: usize = nodes
        .iter()
        .flat_map(|node| node.slots.iter())
        .map(|range| range.clone().count())
        .sum();
    assert_eq!(served, usize::from(SLOTS));
    for master in cluster.masters() {
        assert_eq!(
            cluster.replicas_of(master).len(),
            1,
            "one replica of {master}"
        );
    }

    let mut random = Lcg(13);
    let keys: Vec<String> = (0..1000)
        .map(|i| match i % 4 {
            0 => format!("lock:{i}"),
            1 => format!("{{lock:{}}}:token", random.below(1_000_000)),
            2 => format!("a{{}}b{{{}}}", random.below(100)),
            _ => (0..random.below(20))
                .map(|_| char::from(b'!' + random.below(90) as u8))
                .collect(),
        })
        .collect();
    let mut pipe = redis::pipe();
    for key in &keys {
        pipe.cmd("CLUSTER").arg("KEYSLOT").arg(key);
    }
    let port = cluster.ports()[0];
    let redis_slots: Vec<u16> = pipe
        .query(&mut cluster.server(port).connection())
        .expect("CLUSTER KEYSLOT");
    for (key, redis_slot) in keys.iter().zip(redis_slots) {
        assert_eq!(slot(key), redis_slot, "slot of {key:?}");
    }

    // The master a key routes to takes it without redirecting.
    for key in keys.iter().take(20) {
        let master = cluster.master_for_key(key);
        let () = cluster
            .server(master)
            .connection()
            .set(key, "v")
            .expect("SET on the key's master");
    }
}

#[test]
fn each_kind_of_failover_promotes_the_replica() {
    let cluster = RedisCluster::start(3, 1);
    let master = cluster.master_for_key("{failover}");
    let replica = cluster.replicas_of(master)[0];
    let () = cluster
        .server(master)
        .connection()
        .set("{failover}", "kept")
        .expect("SET");

    cluster.failover(replica, Failover::Coordinated);
    assert_eq!(cluster.master_for_key("{failover}"), replica);
    let old = cluster.nodes().into_iter().find(|node| node.port == master);
    assert_eq!(
        old.map(|node| (node.role, node.master)),
        Some((Role::Replica, Some(replica)))
    );
    assert_eq!(
        get(&cluster, replica, "{failover}")
            .expect("GET")
            .as_deref(),
        Some("kept")
    );

    cluster.failover(master, Failover::Force);
    assert_eq!(cluster.master_for_key("{failover}"), master);
    assert_eq!(cluster.replicas_of(master), vec![replica]);

    cluster.failover(replica, Failover::Takeover);
    assert_eq!(cluster.master_for_key("{failover}"), replica);
    assert_eq!(cluster.replicas_of(replica), vec![master]);
}

#[test]
fn a_slot_migration_moves_its_keys_and_redirects_with_ask_meanwhile() {
    let cluster = RedisCluster::start(3, 1);
    let key = "{migrated}";
    let moving = slot(key);
    let from = cluster.master_of_slot(moving);
    let to = cluster
        .masters()
        .into_iter()
        .find(|&port| port != from)
        .expect("another master");
    let () = cluster
        .server(from)
        .connection()
        .set(key, "moved")
        .expect("SET");
    let () = cluster
        .server(from)
        .connection()
        .set("{migrated}:2", "too")
        .expect("SET");

    cluster.begin_migration(moving, from, to);
    assert_eq!(cluster.move_keys(moving, from, to), 2);
    let asked = get(&cluster, from, key).expect_err("the old master redirects a moved key");
    assert_eq!(asked.code(), Some("ASK"), "{asked}");
    cluster.finish_migration(moving, from, to);
    assert_eq!(cluster.master_of_slot(moving), to);
    assert_eq!(
        get(&cluster, to, key).expect("GET").as_deref(),
        Some("moved")
    );
    let moved = get(&cluster, from, key).expect_err("the old master redirects for good");
    assert_eq!(moved.code(), Some("MOVED"), "{moved}");

    // And back in one call.
    cluster.migrate_slot(moving, to, from);
    assert_eq!(cluster.master_of_slot(moving), from);
    assert_eq!(
        get(&cluster, from, key).expect("GET").as_deref(),
        Some("moved")
    );
}

#[test]
fn a_paused_or_killed_master_is_replaced_by_its_replica_and_rejoins_as_a_replica() {
    let mut cluster = RedisCluster::start(3, 1);
    let rejoined_as_replica_of = |cluster: &RedisCluster, port: u16| {
        let node = cluster.nodes().into_iter().find(|node| node.port == port);
        node.filter(|node| node.role == Role::Replica)
            .and_then(|node| node.master)
    };

    let paused = cluster.master_for_key("{paused}");
    let its_replica = cluster.replicas_of(paused)[0];
    cluster.pause(paused);
    cluster.wait_ok();
    assert_eq!(cluster.master_for_key("{paused}"), its_replica);
    cluster.resume(paused);
    cluster.wait_ok();
    assert_eq!(rejoined_as_replica_of(&cluster, paused), Some(its_replica));

    let killed = cluster.master_for_key("{killed}");
    let its_replica = cluster.replicas_of(killed)[0];
    cluster.kill(killed);
    cluster.wait_ok();
    assert_eq!(cluster.master_for_key("{killed}"), its_replica);
    cluster.start_again(killed);
    cluster.wait_ok();
    assert_eq!(rejoined_as_replica_of(&cluster, killed), Some(its_replica));
}

#[test]
fn a_forced_failover_to_a_replica_cut_off_loses_what_the_dead_master_acknowledged() {
    let mut cluster = RedisCluster::start(3, 1);
    let master = cluster.master_for_key("{forced}");
    let replica = cluster.replicas_of(master)[0];
    // The replica has the first write before it is cut off: WAIT, on the connection that
    // wrote it, for its acknowledgement (up to 5 s).
    let mut writer = cluster.server(master).connection();
    let () = writer.set("{forced}", "before").expect("SET");
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut writer)
        .expect("WAIT");
    assert_eq!(acked, 1, "the replica acknowledged the first write");

    cluster.pause_replica(replica);
    let () = cluster
        .server(master)
        .connection()
        .set("{forced}", "unreplicated")
        .expect("SET");
    cluster.kill(master);
    cluster.resume(replica);
    cluster.failover(replica, Failover::Force);
    assert_eq!(cluster.master_for_key("{forced}"), replica);
    assert_eq!(
        get(&cluster, replica, "{forced}").expect("GET").as_deref(),
        Some("before"),
        "the write made while the replica was cut off is lost"
    );

    cluster.start_again(master);
    cluster.wait_ok();
    assert_eq!(cluster.replicas_of(replica), vec![master]);
}

//! Transactions and TTL nodes against a real ZooKeeper server: a transaction applied whole, one
//! refused whole at the operation that fails (nothing before it applied), a check of another
//! session's ephemeral node that ends with that session, the watches a transaction fires, and
//! TTL nodes where the server offers them and where it does not.

use super::call_tests::{config, next_event, open, session_on, soon};
use super::*;
use std::thread;
use testkit::ZooKeeper;

#[test]
fn a_transaction_is_applied_whole_and_says_what_each_operation_did() {
    let server = ZooKeeper::start();
    let (zk, _events) = session_on(&server);
    zk.create("/a", b"one", CreateMode::Persistent, soon())
        .expect("create");
    zk.create("/gone", b"", CreateMode::Persistent, soon())
        .expect("create");
    let results = zk
        .multi(
            &[
                Op::check("/a", Some(0)),
                Op::create("/a/n-", b"x".to_vec(), CreateMode::PersistentSequential),
                Op::set_data("/a", b"two".to_vec(), Some(0)),
                Op::delete("/gone", None),
            ],
            soon(),
        )
        .expect("applied");
    assert_eq!(results.len(), 4);
    assert_eq!(results[0], OpResult::Checked);
    let OpResult::Created { path } = &results[1] else {
        panic!("{results:?}");
    };
    assert!(path.starts_with("/a/n-0"), "{path}");
    let OpResult::DataSet(set) = &results[2] else {
        panic!("{results:?}");
    };
    assert_eq!(set.version, 1);
    // One transaction: every write of it has the one zxid.
    let created = zk.exists(path, false, soon()).expect("read").expect("made");
    assert_eq!((set.mzxid, created.data_length), (created.czxid, 1));
    assert_eq!(results[3], OpResult::Deleted);
    assert_eq!(zk.get_data("/a", false, soon()).expect("read").0, b"two");
    assert_eq!(zk.exists("/gone", false, soon()), Ok(None));
    assert_eq!(zk.multi(&[], soon()), Ok(Vec::new()));
}

#[test]
fn a_failed_operation_refuses_the_whole_transaction_and_names_itself() {
    let server = ZooKeeper::start();
    let (zk, _events) = session_on(&server);
    zk.create("/a", b"one", CreateMode::Persistent, soon())
        .expect("create");
    let refused = zk.multi(
        &[
            Op::create("/b", b"made".to_vec(), CreateMode::Persistent),
            Op::set_data("/a", b"two".to_vec(), None),
            Op::set_data("/a", b"three".to_vec(), Some(0)),
            Op::delete("/a", None),
        ],
        soon(),
    );
    assert_eq!(
        refused,
        Err(Error::Aborted {
            index: 2,
            error: Box::new(Error::BadVersion)
        })
    );
    assert_eq!(zk.exists("/b", false, soon()), Ok(None), "not half-applied");
    let (data, stat) = zk.get_data("/a", false, soon()).expect("read");
    assert_eq!((data.as_slice(), stat.version), (&b"one"[..], 0));
    let missing = zk.multi(
        &[
            Op::check("/none", None),
            Op::create("/b", b"".to_vec(), CreateMode::Persistent),
        ],
        soon(),
    );
    assert_eq!(
        missing,
        Err(Error::Aborted {
            index: 0,
            error: Box::new(Error::NoNode)
        })
    );
    assert_eq!(zk.exists("/b", false, soon()), Ok(None));
    assert!(
        missing
            .expect_err("refused")
            .to_string()
            .contains("none was applied"),
        "the message says nothing was written"
    );
    assert!(matches!(
        zk.multi(&[Op::check("relative", None)], soon()),
        Err(Error::BadPath(_))
    ));
}

#[test]
fn a_check_of_an_ephemeral_node_stops_writes_once_its_session_ends() {
    let server = ZooKeeper::start();
    let (holder, _held) = session_on(&server);
    let (writer, _events) = session_on(&server);
    holder
        .create("/lock", b"", CreateMode::Ephemeral, soon())
        .expect("create");
    let guarded = |value: &[u8]| {
        writer.multi(
            &[
                Op::check("/lock", None),
                Op::set_data("/data", value.to_vec(), None),
            ],
            soon(),
        )
    };
    writer
        .create("/data", b"", CreateMode::Persistent, soon())
        .expect("create");
    guarded(b"while held").expect("the node exists");
    holder.close(soon());
    assert!(matches!(
        guarded(b"after"),
        Err(Error::Aborted { index: 0, .. })
    ));
    assert_eq!(
        writer.get_data("/data", false, soon()).expect("read").0,
        b"while held"
    );
}

#[test]
fn a_transaction_fires_the_watches_on_what_it_wrote_and_works_under_a_chroot() {
    let server = ZooKeeper::start();
    let (root, _events) = session_on(&server);
    root.ensure_path("/app/jobs", soon()).expect("made");
    let mut chrooted = config(&server.connect_string(), Duration::from_secs(5));
    chrooted.chroot = Some("/app".into());
    let (zk, events) = open(chrooted);
    zk.get_data("/jobs", true, soon()).expect("watched");
    let results = zk
        .multi(
            &[
                Op::set_data("/jobs", b"1".to_vec(), None),
                Op::create("/jobs/j-", b"".to_vec(), CreateMode::PersistentSequential),
            ],
            soon(),
        )
        .expect("applied");
    let OpResult::Created { path, .. } = &results[1] else {
        panic!("{results:?}");
    };
    assert!(path.starts_with("/jobs/j-"), "chroot stripped: {path}");
    assert_eq!(
        next_event(&events, Duration::from_secs(5)),
        Some(Event::NodeDataChanged("/jobs".into()))
    );
    assert!(root
        .exists(&format!("/app{path}"), false, soon())
        .expect("reachable")
        .is_some());
}

#[test]
fn a_ttl_node_is_refused_where_the_server_does_not_offer_them() {
    let server = ZooKeeper::start();
    let (zk, _events) = session_on(&server);
    assert_eq!(
        zk.create_ttl("/t", b"", Duration::from_secs(5), soon()),
        Err(Error::Unimplemented)
    );
    assert!(matches!(
        zk.create_ttl("/t", b"", Duration::ZERO, soon()),
        Err(Error::BadPath(_))
    ));
}

#[test]
fn a_ttl_node_left_unchanged_is_deleted_and_one_changed_lives_on() {
    let server = ZooKeeper::start_with_properties(
        &["extendedTypesEnabled=true"],
        &["znode.container.checkIntervalMs=100"],
    );
    let (zk, events) = session_on(&server);
    let ttl = Duration::from_millis(1500);
    let before = Instant::now();
    let (path, stat) = zk.create_ttl("/left", b"3", ttl, soon()).expect("offered");
    assert_eq!((path.as_str(), stat.data_length), ("/left", 1));
    zk.create_ttl("/kept", b"3", ttl, soon()).expect("offered");
    assert_eq!(
        zk.create_ttl("/kept", b"", ttl, soon()),
        Err(Error::NodeExists)
    );
    zk.exists("/left", true, soon()).expect("watched");
    // "/kept" is changed more often than its TTL; "/left" is left alone until it goes.
    let give_up = before + Duration::from_secs(20);
    while zk.exists("/left", false, soon()).expect("read").is_some() {
        assert!(Instant::now() < give_up, "a TTL node left unchanged stays");
        zk.set_data("/kept", b"2", None, soon()).expect("set");
        thread::sleep(ttl / 5);
    }
    assert!(
        before.elapsed() >= ttl,
        "deleted after {:?}",
        before.elapsed()
    );
    assert!(zk.exists("/kept", false, soon()).expect("read").is_some());
    assert_eq!(
        next_event(&events, Duration::from_secs(5)),
        Some(Event::NodeDeleted("/left".into()))
    );
}

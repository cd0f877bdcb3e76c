//! The client's calls against a real ZooKeeper server: round trips, ephemeral and sequential
//! nodes, watches, the chroot and paths refused before sending; and the helpers the client's
//! tests share (a session's settings, its opening, its events).

use super::*;
use crossbeam_channel::Receiver;
use std::net::TcpListener;
use std::thread;

use testkit::ZooKeeper;

pub(super) fn config(hosts: &str, session_timeout: Duration) -> Config {
    Config {
        hosts: vec![hosts.to_owned()],
        chroot: None,
        session_timeout,
        connect_timeout: Duration::from_millis(500),
        digest: None,
    }
}

pub(super) fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// A session on `config`, and the events it reports.
pub(super) fn open(config: Config) -> (Session, Receiver<Event>) {
    let (tell, told) = crossbeam_channel::unbounded();
    let events: Arc<dyn Fn(Event) + Send + Sync> = Arc::new(move |event| {
        let _ = tell.send(event);
    });
    let session = Session::connect(config, soon(), events).expect("connect");
    assert_eq!(
        told.recv_timeout(Duration::from_secs(5)),
        Ok(Event::Connected)
    );
    (session, told)
}

pub(super) fn session_on(server: &ZooKeeper) -> (Session, Receiver<Event>) {
    open(config(&server.connect_string(), Duration::from_secs(5)))
}

/// The next event, waiting up to `wait`.
pub(super) fn next_event(events: &Receiver<Event>, wait: Duration) -> Option<Event> {
    events.recv_timeout(wait).ok()
}

#[test]
fn nodes_are_created_read_listed_and_deleted() {
    let server = ZooKeeper::start();
    let (zk, _events) = session_on(&server);
    assert!(zk.is_connected());
    assert_eq!(zk.server(), Some(server.connect_string()));
    assert_eq!(zk.timeout(), Duration::from_secs(5));

    let (path, stat) = zk
        .create("/a", b"hello", CreateMode::Persistent, soon())
        .expect("create");
    assert_eq!(path, "/a");
    assert_eq!(
        (stat.version, stat.data_length, stat.ephemeral_owner),
        (0, 5, 0)
    );
    assert_eq!(
        zk.create("/a", b"", CreateMode::Persistent, soon()),
        Err(Error::NodeExists)
    );
    assert_eq!(
        zk.create("/none/b", b"", CreateMode::Persistent, soon()),
        Err(Error::NoNode)
    );
    for child in ["x", "y", "z"] {
        zk.create(&format!("/a/{child}"), b"", CreateMode::Persistent, soon())
            .expect("create a child");
    }
    let found = zk.exists("/a", false, soon()).expect("exists");
    assert_eq!(found.map(|stat| stat.num_children), Some(3));
    assert_eq!(zk.exists("/nothing", false, soon()), Ok(None));
    let (data, stat) = zk.get_data("/a", false, soon()).expect("get");
    assert_eq!(
        (data.as_slice(), stat.czxid),
        (&b"hello"[..], found.expect("found").czxid)
    );
    assert_eq!(zk.get_data("/nothing", false, soon()), Err(Error::NoNode));
    let (mut children, stat) = zk.get_children("/a", false, soon()).expect("children");
    children.sort();
    assert_eq!(children, ["x", "y", "z"]);
    assert_eq!(stat.num_children, 3);

    assert_eq!(zk.delete("/a", None, soon()), Err(Error::NotEmpty));
    assert_eq!(zk.delete("/a/x", Some(7), soon()), Err(Error::BadVersion));
    zk.delete("/a/x", Some(0), soon())
        .expect("delete at its version");
    assert_eq!(zk.delete("/a/x", None, soon()), Err(Error::NoNode));

    // Pipelined: one result per path, in order, a bad path refused on its own.
    let paths: Vec<String> = ["/a/y", "/a/x", "bad", "/a/z", "/"]
        .iter()
        .map(|path| path.to_string())
        .collect();
    let results = zk.exists_many(&paths, soon());
    assert_eq!(results.len(), 5);
    assert!(matches!(results[0], Ok(Some(_))));
    assert_eq!(results[1], Ok(None));
    assert!(matches!(results[2], Err(Error::BadPath(_))));
    assert!(matches!(results[3], Ok(Some(_))));
    assert!(matches!(results[4], Ok(Some(_))));

    zk.ensure_path("/deep/er/path", soon()).expect("ensure");
    zk.ensure_path("/deep/er/path", soon())
        .expect("ensure again");
    zk.ensure_path("/deep/other", soon())
        .expect("ensure a sibling");
    assert!(zk
        .exists("/deep/er/path", false, soon())
        .expect("exists")
        .is_some());
    zk.sync_ping(soon()).expect("ping");

    // A server that refuses first in the list: the next one is tried. An idle session pings:
    // nothing happens to it over several timeouts.
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").to_string()
    };
    let mut two = config(&closed, Duration::from_millis(800));
    two.hosts.push(server.connect_string());
    let (idle, events) = open(two);
    assert_eq!(idle.server(), Some(server.connect_string()));
    assert_eq!(next_event(&events, Duration::from_millis(2500)), None);
    idle.sync_ping(soon()).expect("still alive");
    assert!(idle.is_connected());
}

/// Threads read nodes of their own through one session, some with deadlines too short for a
/// reply: every reply a caller gets is its own, and the late ones reach nobody.
#[test]
fn every_reply_reaches_its_own_caller() {
    let server = ZooKeeper::start();
    let (zk, events) = session_on(&server);
    let workers: Vec<_> = (0..8)
        .map(|worker| {
            let zk = zk.clone();
            thread::spawn(move || {
                let path = format!("/n{worker}");
                zk.create(&path, path.as_bytes(), CreateMode::Ephemeral, soon())
                    .expect("create");
                let (mut answered, mut timed_out) = (0, 0);
                for n in 0..60 {
                    let bound = if n % 3 == 0 { 0 } else { 2000 };
                    let deadline = Instant::now() + Duration::from_micros(bound * 1000 + 50);
                    match zk.get_data(&path, false, deadline) {
                        Ok((data, _)) => {
                            assert_eq!(data, path.as_bytes(), "a reply reached another caller");
                            answered += 1;
                        }
                        Err(Error::Timeout) => timed_out += 1,
                        Err(other) => panic!("{other:?}"),
                    }
                }
                (answered, timed_out)
            })
        })
        .collect();
    let mut answered = 0;
    for worker in workers {
        answered += worker.join().expect("a worker").0;
    }
    assert!(answered >= 8 * 40, "{answered}");
    let paths: Vec<String> = (0..8).map(|worker| format!("/n{worker}")).collect();
    let found = zk.exists_many(&paths, soon());
    assert!(
        found.iter().all(|found| matches!(found, Ok(Some(_)))),
        "{found:?}"
    );
    // A deadline that passed before a byte was written did not cost the connection.
    assert_eq!(events.try_iter().collect::<Vec<_>>(), []);
}

#[test]
fn ephemeral_sequential_nodes_are_numbered_and_go_with_their_session() {
    let server = ZooKeeper::start();
    let (owner, _events) = session_on(&server);
    let (other, _other_events) = session_on(&server);
    owner.ensure_path("/locks", soon()).expect("ensure");
    let mut names = Vec::new();
    for _ in 0..3 {
        let (path, stat) = owner
            .create("/locks/lock-", b"", CreateMode::EphemeralSequential, soon())
            .expect("create");
        assert_eq!(stat.ephemeral_owner, owner.session_id());
        names.push(path);
    }
    for name in &names {
        let suffix = name.strip_prefix("/locks/lock-").expect("the prefix");
        assert_eq!(suffix.len(), 10, "{name}");
        assert!(suffix.bytes().all(|byte| byte.is_ascii_digit()), "{name}");
    }
    assert!(names.windows(2).all(|pair| pair[0] < pair[1]), "{names:?}");
    let (bare, _) = owner
        .create("/locks/", b"", CreateMode::PersistentSequential, soon())
        .expect("a sequential name of digits only");
    assert_eq!(bare.len(), "/locks/".len() + 10, "{bare}");

    let (plain, _) = owner
        .create("/locks/mine", b"", CreateMode::Ephemeral, soon())
        .expect("create");
    assert_eq!(plain, "/locks/mine");
    owner.close(soon());
    assert!(owner.is_expired());
    assert_eq!(owner.exists("/locks", false, soon()), Err(Error::Closed));
    for name in names.iter().chain([&plain]) {
        assert_eq!(other.exists(name, false, soon()), Ok(None), "{name}");
    }
    assert!(other
        .exists(&bare, false, soon())
        .expect("exists")
        .is_some());

    // The last handle dropped closes the session too.
    let (dropped, _) = session_on(&server);
    let copy = dropped.clone();
    copy.create("/gone", b"", CreateMode::Ephemeral, soon())
        .expect("create");
    drop(dropped);
    assert!(other
        .exists("/gone", false, soon())
        .expect("exists")
        .is_some());
    drop(copy);
    assert_eq!(other.exists("/gone", false, soon()), Ok(None));
}

#[test]
fn watches_fire_once_on_another_sessions_changes() {
    let server = ZooKeeper::start();
    let (watcher, events) = session_on(&server);
    let (writer, _) = session_on(&server);
    let wait = Duration::from_secs(5);
    writer
        .create("/w", b"", CreateMode::Persistent, soon())
        .expect("create");

    assert!(watcher
        .exists("/w", true, soon())
        .expect("exists")
        .is_some());
    assert_eq!(watcher.exists("/later", true, soon()), Ok(None));
    watcher.get_children("/w", true, soon()).expect("children");
    assert_eq!(watcher.watch_count(), 3);

    writer
        .create("/later", b"", CreateMode::Persistent, soon())
        .expect("create");
    assert_eq!(
        next_event(&events, wait),
        Some(Event::NodeCreated("/later".into()))
    );
    writer
        .create("/w/c", b"", CreateMode::Persistent, soon())
        .expect("create");
    assert_eq!(
        next_event(&events, wait),
        Some(Event::NodeChildrenChanged("/w".into()))
    );
    writer.delete("/w/c", None, soon()).expect("delete");
    writer.delete("/w", None, soon()).expect("delete");
    assert_eq!(
        next_event(&events, wait),
        Some(Event::NodeDeleted("/w".into()))
    );
    assert_eq!(watcher.watch_count(), 0);
    // Each fired once: the child's deletion fired nothing more.
    assert_eq!(next_event(&events, Duration::from_millis(200)), None);

    writer
        .create("/d", b"1", CreateMode::Persistent, soon())
        .expect("create");
    watcher.get_data("/d", true, soon()).expect("get");
    writer.delete("/d", None, soon()).expect("delete");
    assert_eq!(
        next_event(&events, wait),
        Some(Event::NodeDeleted("/d".into()))
    );
}

#[test]
fn the_chroot_is_prefixed_to_paths_sent_and_stripped_from_paths_received() {
    let server = ZooKeeper::start();
    let (plain, _) = session_on(&server);
    let mut rooted = config(&server.connect_string(), Duration::from_secs(5));
    rooted.chroot = Some("/app/one".into());
    rooted.digest = Some("user:secret".into());
    let shown = format!("{rooted:?}");
    assert!(
        !shown.contains("secret") && shown.contains("/app/one"),
        "{shown}"
    );
    let (zk, events) = open(rooted);

    zk.ensure_path("/", soon()).expect("the chroot created");
    assert!(plain
        .exists("/app/one", false, soon())
        .expect("exists")
        .is_some());
    zk.ensure_path("/locks", soon()).expect("ensure");
    let (path, _) = zk
        .create("/locks/n-", b"", CreateMode::EphemeralSequential, soon())
        .expect("create");
    assert!(path.starts_with("/locks/n-"), "{path}");
    assert!(plain
        .exists(&format!("/app/one{path}"), false, soon())
        .expect("exists")
        .is_some());
    let (children, _) = zk.get_children("/locks", false, soon()).expect("children");
    assert_eq!(children.len(), 1);
    assert!(path.ends_with(&children[0]));

    zk.exists(&path, true, soon()).expect("exists");
    plain
        .delete(&format!("/app/one{path}"), None, soon())
        .expect("delete");
    assert_eq!(
        next_event(&events, Duration::from_secs(5)),
        Some(Event::NodeDeleted(path))
    );
    zk.sync_ping(soon()).expect("ping");
}

#[test]
fn bad_paths_are_refused_without_a_round_trip() {
    let server = ZooKeeper::start();
    let (zk, _) = session_on(&server);
    // A closed session and a deadline already past: only a check made before anything else
    // can answer.
    zk.close(soon());
    let past = Instant::now();
    for bad in ["", "a", "/a/", "/a//b", "/a/./b", "/a/..", "/a\0"] {
        assert!(
            matches!(zk.exists(bad, false, past), Err(Error::BadPath(_))),
            "{bad:?}"
        );
        assert!(matches!(
            zk.get_data(bad, false, past),
            Err(Error::BadPath(_))
        ));
        assert!(matches!(
            zk.get_children(bad, true, past),
            Err(Error::BadPath(_))
        ));
        assert!(matches!(zk.delete(bad, None, past), Err(Error::BadPath(_))));
        assert!(matches!(
            zk.create(bad, b"", CreateMode::Persistent, past),
            Err(Error::BadPath(_))
        ));
        assert!(matches!(zk.ensure_path(bad, past), Err(Error::BadPath(_))));
    }
    assert_eq!(zk.exists("/fine", false, past), Err(Error::Closed));
    let mut bad_root = config(&server.connect_string(), Duration::from_secs(5));
    bad_root.chroot = Some("app".into());
    let refused = Session::connect(bad_root, soon(), Arc::new(|_| {}));
    assert!(matches!(refused, Err(Error::BadPath(_))), "{refused:?}");
}

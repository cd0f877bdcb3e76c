//! The client against real ZooKeeper servers (and, for the failures of a peer that is not one,
//! against listeners of the test's own): round trips, ephemeral and sequential nodes, watches,
//! the chroot, paths refused before sending, and what a session does when its server pauses
//! for less, and for more, than the session timeout.

use super::*;
use crossbeam_channel::Receiver;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;

use testkit::{Proxy, ZooKeeper, ZooKeeperEnsemble};

fn config(hosts: &str, session_timeout: Duration) -> ZkConfig {
    ZkConfig {
        hosts: vec![hosts.to_owned()],
        chroot: None,
        session_timeout,
        connect_timeout: Duration::from_millis(500),
        digest: None,
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// A session on `config`, and the events it reports.
fn open(config: ZkConfig) -> (Session, Receiver<Event>) {
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

fn session_on(server: &ZooKeeper) -> (Session, Receiver<Event>) {
    open(config(&server.connect_string(), Duration::from_secs(5)))
}

/// The next event, waiting up to `wait`.
fn next_event(events: &Receiver<Event>, wait: Duration) -> Option<Event> {
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
        Err(ZkError::NodeExists)
    );
    assert_eq!(
        zk.create("/none/b", b"", CreateMode::Persistent, soon()),
        Err(ZkError::NoNode)
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
    assert_eq!(zk.get_data("/nothing", false, soon()), Err(ZkError::NoNode));
    let (mut children, stat) = zk.get_children("/a", false, soon()).expect("children");
    children.sort();
    assert_eq!(children, ["x", "y", "z"]);
    assert_eq!(stat.num_children, 3);

    assert_eq!(zk.delete("/a", None, soon()), Err(ZkError::NotEmpty));
    assert_eq!(zk.delete("/a/x", Some(7), soon()), Err(ZkError::BadVersion));
    zk.delete("/a/x", Some(0), soon())
        .expect("delete at its version");
    assert_eq!(zk.delete("/a/x", None, soon()), Err(ZkError::NoNode));

    // Pipelined: one result per path, in order, a bad path refused on its own.
    let paths: Vec<String> = ["/a/y", "/a/x", "bad", "/a/z", "/"]
        .iter()
        .map(|path| path.to_string())
        .collect();
    let results = zk.exists_many(&paths, soon());
    assert_eq!(results.len(), 5);
    assert!(matches!(results[0], Ok(Some(_))));
    assert_eq!(results[1], Ok(None));
    assert!(matches!(results[2], Err(ZkError::BadPath(_))));
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
                        Err(ZkError::Timeout) => timed_out += 1,
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
    assert_eq!(owner.exists("/locks", false, soon()), Err(ZkError::Closed));
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
            matches!(zk.exists(bad, false, past), Err(ZkError::BadPath(_))),
            "{bad:?}"
        );
        assert!(matches!(
            zk.get_data(bad, false, past),
            Err(ZkError::BadPath(_))
        ));
        assert!(matches!(
            zk.get_children(bad, true, past),
            Err(ZkError::BadPath(_))
        ));
        assert!(matches!(
            zk.delete(bad, None, past),
            Err(ZkError::BadPath(_))
        ));
        assert!(matches!(
            zk.create(bad, b"", CreateMode::Persistent, past),
            Err(ZkError::BadPath(_))
        ));
        assert!(matches!(
            zk.ensure_path(bad, past),
            Err(ZkError::BadPath(_))
        ));
    }
    assert_eq!(zk.exists("/fine", false, past), Err(ZkError::Closed));
    let mut bad_root = config(&server.connect_string(), Duration::from_secs(5));
    bad_root.chroot = Some("app".into());
    let refused = Session::connect(bad_root, soon(), Arc::new(|_| {}));
    assert!(matches!(refused, Err(ZkError::BadPath(_))), "{refused:?}");
}

/// A listener that answers every connection with `answer` (or nothing, for `None`), then holds
/// it open.
fn listener(answer: Option<&'static [u8]>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    thread::spawn(move || {
        let mut held = Vec::new();
        for mut socket in listener.incoming().flatten() {
            if let Some(answer) = answer {
                let _ = socket.write_all(answer);
            }
            held.push(socket);
        }
    });
    addr
}

#[test]
fn a_peer_that_sends_garbage_is_a_protocol_error_by_the_deadline() {
    let answers: [&'static [u8]; 3] = [
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
        &[0xff, 0xff, 0xff, 0xf0, 1, 2, 3],
        &[0, 0, 0, 3, 1, 2, 3],
    ];
    for answer in answers {
        let addr = listener(Some(answer));
        let began = Instant::now();
        let deadline = began + Duration::from_secs(2);
        let result = Session::connect(
            config(&addr, Duration::from_secs(1)),
            deadline,
            Arc::new(|_| {}),
        );
        assert!(Instant::now() <= deadline + Duration::from_millis(200));
        match result {
            Err(ZkError::Protocol(why)) => assert!(why.contains(&addr), "{why}"),
            other => panic!("{answer:?}: {other:?}"),
        }
    }
}

#[test]
fn a_silent_port_is_unavailable_by_the_deadline() {
    let addr = listener(None);
    let began = Instant::now();
    let deadline = began + Duration::from_millis(700);
    let mut silent = config(&addr, Duration::from_secs(1));
    silent.connect_timeout = Duration::from_millis(300);
    let result = Session::connect(silent, deadline, Arc::new(|_| {}));
    let took = began.elapsed();
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took <= Duration::from_millis(1000), "{took:?}");
    match result {
        Err(ZkError::Unavailable(why)) => assert!(why.contains(&addr), "{why}"),
        other => panic!("{other:?}"),
    }
    // Nothing listens at all: refused at once, tried again until the deadline.
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").to_string()
    };
    let deadline = Instant::now() + Duration::from_millis(300);
    let result = Session::connect(
        config(&closed, Duration::from_secs(1)),
        deadline,
        Arc::new(|_| {}),
    );
    assert!(
        matches!(result, Err(ZkError::Unavailable { .. })),
        "{result:?}"
    );
    assert!(Instant::now() <= deadline + Duration::from_millis(200));
}

#[test]
fn a_server_paused_within_the_session_timeout_keeps_the_session() {
    let server = ZooKeeper::start();
    let timeout = Duration::from_millis(1500);
    let (zk, events) = open(config(&server.connect_string(), timeout));
    assert_eq!(zk.timeout(), timeout);
    let id = zk.session_id();
    zk.create("/held", b"", CreateMode::Ephemeral, soon())
        .expect("create");
    zk.exists("/held", true, soon()).expect("watch");
    // Heard from just now: the server last heard from the session then too.
    zk.sync_ping(soon()).expect("ping");
    let paused = Instant::now();
    server.pause();

    let call = Instant::now();
    let deadline = call + Duration::from_millis(200);
    let in_flight = {
        let zk = zk.clone();
        thread::spawn(move || zk.get_data("/held", false, Instant::now() + Duration::from_secs(4)))
    };
    assert_eq!(zk.get_data("/held", false, deadline), Err(ZkError::Timeout));
    let late = Instant::now().saturating_duration_since(deadline);
    assert!(late < Duration::from_millis(150), "{late:?} late");

    // Nothing read for two thirds of the timeout: the connection is taken for lost.
    assert_eq!(next_event(&events, timeout), Some(Event::Disconnected));
    assert!(!zk.is_connected());
    assert_eq!(
        in_flight.join().expect("the call in flight"),
        Err(ZkError::ConnectionLoss)
    );
    // A call made now waits for the connection to come back.
    let waiting = {
        let zk = zk.clone();
        thread::spawn(move || zk.get_data("/held", false, Instant::now() + Duration::from_secs(4)))
    };
    thread::sleep(Duration::from_millis(1200).saturating_sub(paused.elapsed()));
    server.resume();
    assert_eq!(
        next_event(&events, Duration::from_secs(3)),
        Some(Event::Connected)
    );
    assert!(zk.is_connected());
    assert_eq!(zk.session_id(), id);
    assert!(waiting.join().expect("the waiting call").is_ok());
    assert!(zk.exists("/held", false, soon()).expect("exists").is_some());
    let (other, _) = session_on(&server);
    other.delete("/held", None, soon()).expect("delete");
    // The watch was re-armed on the new connection.
    assert_eq!(
        next_event(&events, Duration::from_secs(3)),
        Some(Event::NodeDeleted("/held".into()))
    );
}

#[test]
fn a_server_paused_past_the_session_timeout_expires_it_for_good() {
    let server = ZooKeeper::start();
    let timeout = Duration::from_millis(600);
    let (zk, events) = open(config(&server.connect_string(), timeout));
    let id = zk.session_id();
    zk.create("/held", b"", CreateMode::Ephemeral, soon())
        .expect("create");
    server.pause();
    assert_eq!(
        next_event(&events, Duration::from_secs(2)),
        Some(Event::Disconnected)
    );
    assert_eq!(
        next_event(&events, Duration::from_secs(3)),
        Some(Event::Expired)
    );
    assert!(zk.is_expired());
    assert!(!zk.is_connected());
    assert_eq!(
        zk.exists("/held", false, soon()),
        Err(ZkError::SessionExpired)
    );
    server.resume();
    let (other, _) = session_on(&server);
    let began = Instant::now();
    while other.exists("/held", false, soon()) != Ok(None) {
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "the ephemeral node stayed"
        );
        thread::sleep(Duration::from_millis(50));
    }
    // Never a new session.
    assert_eq!(next_event(&events, Duration::from_millis(500)), None);
    assert_eq!(zk.session_id(), id);
    assert_eq!(
        zk.get_children("/", false, soon()),
        Err(ZkError::SessionExpired)
    );
    zk.close(soon());
    assert_eq!(zk.exists("/", false, soon()), Err(ZkError::SessionExpired));
}

/// The body of the next frame `socket` receives.
fn read_frame(socket: &mut std::net::TcpStream) -> Vec<u8> {
    let mut length = [0u8; 4];
    socket.read_exact(&mut length).expect("a frame's length");
    let mut body = vec![0u8; i32::from_be_bytes(length) as usize];
    socket.read_exact(&mut body).expect("a frame's body");
    body
}

/// A `ConnectResponse` frame.
fn connect_response(timeout_ms: i32, session_id: i64) -> Vec<u8> {
    let mut body = jute::Writer::new();
    body.int(0)
        .int(timeout_ms)
        .long(session_id)
        .buffer(&[7; 16])
        .boolean(false);
    body.frame().expect("small")
}

/// A reply header frame.
fn reply(xid: i32) -> Vec<u8> {
    let mut body = jute::Writer::new();
    body.int(xid).long(1).int(0);
    body.frame().expect("small")
}

/// A server of the test's own that opens session 0x55 on the first connection, answers its
/// pings, and answers its first call with the xid of another; then says on every later
/// connection that the session is gone. Sends what each connection asked (session id, xid
/// of each frame) to `seen`.
fn forgetful_server(seen: crossbeam_channel::Sender<(usize, i64, i32)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    thread::spawn(move || {
        for (index, socket) in listener.incoming().enumerate() {
            let Ok(mut socket) = socket else { return };
            let connect = read_frame(&mut socket);
            let mut request = jute::Reader::new(&connect);
            let _version = request.int("version");
            let _zxid = request.long("zxid");
            let _timeout = request.int("timeout");
            let session = request.long("session").expect("a session id");
            let _ = seen.send((index, session, 0));
            if index > 0 {
                let _ = socket.write_all(&connect_response(0, 0));
                continue;
            }
            let _ = socket.write_all(&connect_response(300, 0x55));
            loop {
                let frame = read_frame(&mut socket);
                let xid = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
                let _ = seen.send((index, session, xid));
                if xid == proto::xid::PING {
                    let _ = socket.write_all(&reply(xid));
                } else {
                    let _ = socket.write_all(&reply(xid + 1));
                    thread::sleep(Duration::from_millis(200));
                    break;
                }
            }
        }
    });
    addr
}

#[test]
fn a_reply_out_of_turn_fails_the_call_and_a_server_that_forgot_the_session_expires_it() {
    let (tell, seen) = crossbeam_channel::unbounded();
    let addr = forgetful_server(tell);
    let (zk, events) = open(config(&addr, Duration::from_millis(300)));
    assert_eq!(zk.session_id(), 0x55);
    assert_eq!(zk.timeout(), Duration::from_millis(300));
    assert_eq!(seen.recv_timeout(Duration::from_secs(1)), Ok((0, 0, 0)));
    // Idle: the client pings within a third of the timeout, and again.
    for _ in 0..2 {
        let began = Instant::now();
        assert_eq!(
            seen.recv_timeout(Duration::from_secs(1)),
            Ok((0, 0, proto::xid::PING))
        );
        assert!(
            began.elapsed() < Duration::from_millis(180),
            "{:?}",
            began.elapsed()
        );
    }
    match zk.exists("/x", false, soon()) {
        Err(ZkError::Protocol(why)) => assert!(why.contains(&addr), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        next_event(&events, Duration::from_secs(1)),
        Some(Event::Disconnected)
    );
    assert_eq!(
        next_event(&events, Duration::from_secs(1)),
        Some(Event::Expired)
    );
    // The second connection asked for the same session, and nothing asked for a new one.
    let asked: Vec<_> = seen
        .try_iter()
        .filter(|(index, _, xid)| *index > 0 && *xid == 0)
        .collect();
    assert_eq!(asked, [(1, 0x55, 0)]);
    assert!(zk.is_expired());
    assert_eq!(zk.exists("/x", false, soon()), Err(ZkError::SessionExpired));
}

#[test]
fn a_server_restarted_within_the_session_timeout_keeps_the_session() {
    let mut server = ZooKeeper::start();
    let (zk, events) = open(config(&server.connect_string(), Duration::from_secs(6)));
    let id = zk.session_id();
    zk.create("/held", b"", CreateMode::Ephemeral, soon())
        .expect("create");
    server.stop();
    assert_eq!(
        next_event(&events, Duration::from_secs(2)),
        Some(Event::Disconnected)
    );
    // Refused meanwhile: the call waits for the server, by its deadline.
    let waiting = {
        let zk = zk.clone();
        thread::spawn(move || zk.exists("/held", true, Instant::now() + Duration::from_secs(8)))
    };
    assert_eq!(
        zk.exists("/held", false, Instant::now() + Duration::from_millis(100)),
        Err(ZkError::ConnectionLoss)
    );
    server.start_again();
    assert_eq!(
        next_event(&events, Duration::from_secs(5)),
        Some(Event::Connected)
    );
    assert_eq!(zk.session_id(), id);
    assert!(waiting
        .join()
        .expect("the waiting call")
        .expect("exists")
        .is_some());
    zk.delete("/held", None, soon()).expect("delete");
    assert_eq!(
        next_event(&events, Duration::from_secs(2)),
        Some(Event::NodeDeleted("/held".into()))
    );
}

#[test]
fn a_cut_network_is_seen_at_once_and_a_silent_one_past_the_timeout_expires_the_session() {
    let server = ZooKeeper::start();
    let proxy = Proxy::start(([127, 0, 0, 1], server.port()).into());
    let (zk, events) = open(config(&proxy.addr(), Duration::from_millis(1500)));
    let id = zk.session_id();
    zk.create("/held", b"", CreateMode::Ephemeral, soon())
        .expect("create");

    proxy.cut();
    let cut = Instant::now();
    assert_eq!(
        next_event(&events, Duration::from_secs(1)),
        Some(Event::Disconnected)
    );
    assert!(
        cut.elapsed() < Duration::from_millis(300),
        "{:?}",
        cut.elapsed()
    );
    proxy.heal();
    assert_eq!(
        next_event(&events, Duration::from_secs(2)),
        Some(Event::Connected)
    );
    assert_eq!(zk.session_id(), id);
    assert!(zk.exists("/held", false, soon()).expect("exists").is_some());

    proxy.freeze();
    assert_eq!(
        next_event(&events, Duration::from_secs(2)),
        Some(Event::Disconnected)
    );
    assert_eq!(
        next_event(&events, Duration::from_secs(3)),
        Some(Event::Expired)
    );
    assert_eq!(
        zk.create("/x", b"", CreateMode::Persistent, soon()),
        Err(ZkError::SessionExpired)
    );
    proxy.heal();
    let (other, _) = session_on(&server);
    let began = Instant::now();
    while other.exists("/held", false, soon()) != Ok(None) {
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "the ephemeral node stayed"
        );
        thread::sleep(Duration::from_millis(50));
    }
    // Nothing of the expired session's connects again: the server has one session, the other.
    assert_eq!(next_event(&events, Duration::from_millis(500)), None);
    let connections =
        testkit::zookeeper_four_letter_word(server.port(), "cons").unwrap_or_default();
    let sessions = connections.matches("sid=0x").count();
    assert_eq!(sessions, 1, "{connections}");
}

#[test]
fn a_session_moves_to_another_server_of_the_ensemble() {
    let mut ensemble = ZooKeeperEnsemble::start(3);
    let mut settings = config(&ensemble.connect_string(), Duration::from_secs(6));
    settings.hosts = ensemble
        .connect_string()
        .split(',')
        .map(str::to_owned)
        .collect();
    let (zk, events) = open(settings);
    let id = zk.session_id();
    zk.create("/held", b"", CreateMode::Ephemeral, soon())
        .expect("create");
    let first = zk.server().expect("a server");
    let index = (0..ensemble.len())
        .find(|&i| first.ends_with(&format!(":{}", ensemble.port(i))))
        .expect("one of the ensemble");
    ensemble.stop(index);
    assert_eq!(
        next_event(&events, Duration::from_secs(2)),
        Some(Event::Disconnected)
    );
    assert_eq!(
        next_event(&events, Duration::from_secs(8)),
        Some(Event::Connected)
    );
    assert_eq!(zk.session_id(), id);
    assert_ne!(zk.server(), Some(first));
    let deadline = Instant::now() + Duration::from_secs(5);
    assert!(zk
        .exists("/held", false, deadline)
        .expect("exists")
        .is_some());
}

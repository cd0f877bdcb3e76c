//! A session whose peer fails: a real ZooKeeper server that pauses for less, and for more, than
//! the session timeout, restarts, is cut off or leaves its ensemble; and, for the failures of a
//! peer that is not one, listeners of the test's own (garbage, a silent port, a server that
//! answers out of turn and forgets the session).

use super::call_tests::{config, next_event, open, session_on, soon};
use super::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;

use testkit::{Proxy, ZooKeeper, ZooKeeperEnsemble};

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
            Err(Error::Protocol(why)) => assert!(why.contains(&addr), "{why}"),
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
        Err(Error::Unavailable(why)) => assert!(why.contains(&addr), "{why}"),
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
        matches!(result, Err(Error::Unavailable { .. })),
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
    assert_eq!(zk.get_data("/held", false, deadline), Err(Error::Timeout));
    let late = Instant::now().saturating_duration_since(deadline);
    assert!(late < Duration::from_millis(150), "{late:?} late");

    // Nothing read for two thirds of the timeout: the connection is taken for lost.
    assert_eq!(next_event(&events, timeout), Some(Event::Disconnected));
    assert!(!zk.is_connected());
    assert_eq!(
        in_flight.join().expect("the call in flight"),
        Err(Error::ConnectionLoss)
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
        Err(Error::SessionExpired)
    );
    server.resume();
    let _other = ephemeral_node_goes(&server);
    // Never a new session.
    assert_eq!(next_event(&events, Duration::from_millis(500)), None);
    assert_eq!(zk.session_id(), id);
    assert_eq!(
        zk.get_children("/", false, soon()),
        Err(Error::SessionExpired)
    );
    zk.close(soon());
    assert_eq!(zk.exists("/", false, soon()), Err(Error::SessionExpired));
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
        Err(Error::Protocol(why)) => assert!(why.contains(&addr), "{why}"),
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
    assert_eq!(zk.exists("/x", false, soon()), Err(Error::SessionExpired));
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
        Err(Error::ConnectionLoss)
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
        Err(Error::SessionExpired)
    );
    proxy.heal();
    let _other = ephemeral_node_goes(&server);
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

/// Waits (5 s at most) until another session sees the expired session's ephemeral node `/held`
/// gone; returns that session.
fn ephemeral_node_goes(server: &ZooKeeper) -> Session {
    let (other, _) = session_on(server);
    let began = Instant::now();
    while other.exists("/held", false, soon()) != Ok(None) {
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "the ephemeral node stayed"
        );
        thread::sleep(Duration::from_millis(50));
    }
    other
}

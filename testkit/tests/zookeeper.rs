//! ZooKeeper started by testkit: a standalone server serves, pauses and comes back on its port
//! after a kill; an ensemble of three elects a leader and another once the leader is killed; the
//! proxy passes bytes on, cuts and freezes the network, and heals it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use testkit::{
    zookeeper_four_letter_word, zookeeper_mode, zookeeper_zxid, Proxy, ZooKeeper, ZooKeeperEnsemble,
};

#[test]
fn a_standalone_server_answers_ruok_and_srvr() {
    let zk = ZooKeeper::start();

    assert_eq!(zk.connect_string(), format!("127.0.0.1:{}", zk.port()));
    assert_eq!(
        zookeeper_four_letter_word(zk.port(), "ruok").as_deref(),
        Some("imok")
    );
    let srvr = zookeeper_four_letter_word(zk.port(), "srvr").expect("an answer to srvr");
    assert!(srvr.contains("Mode: standalone"), "srvr said: {srvr}");
    assert_eq!(zookeeper_mode(zk.port()).as_deref(), Some("standalone"));
    assert!(zookeeper_zxid(zk.port()).is_some(), "srvr said: {srvr}");
    assert!(zk.dir().join("zoo.cfg").is_file());
    let log = std::fs::read_to_string(zk.log_path()).expect("the server's log");
    assert!(log.contains("tickTime 100 ms"), "log: {log}");
}

#[test]
fn a_stopped_server_serves_again_on_its_port_and_a_paused_one_answers_once_resumed() {
    let mut zk = ZooKeeper::start_with(&["forceSync=no"]);
    let port = zk.port();

    zk.pause();
    assert_eq!(
        zookeeper_mode(port),
        None,
        "a paused server does not answer"
    );
    zk.resume();
    assert_eq!(zookeeper_mode(port).as_deref(), Some("standalone"));

    zk.stop();
    assert!(!zk.is_running());
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "refused");
    zk.start_again();
    assert!(zk.is_running());
    assert_eq!(zk.port(), port);
    assert_eq!(zookeeper_mode(port).as_deref(), Some("standalone"));
}

#[test]
#[should_panic(expected = "NumberFormatException")]
fn a_server_that_exits_at_start_fails_the_test_with_its_log() {
    let _ = ZooKeeper::start_with(&["tickTime=often"]);
}

#[test]
fn an_ensemble_of_three_elects_a_new_leader_when_its_leader_is_killed() {
    let mut ensemble = ZooKeeperEnsemble::start(3);
    assert_eq!(ensemble.len(), 3);
    let expected: Vec<String> = (0..3)
        .map(|i| format!("127.0.0.1:{}", ensemble.port(i)))
        .collect();
    assert_eq!(ensemble.connect_string(), expected.join(","));

    let leader = ensemble.leader();
    for i in (0..3).filter(|&i| i != leader) {
        assert_eq!(
            zookeeper_mode(ensemble.port(i)).as_deref(),
            Some("follower")
        );
    }

    ensemble.stop(leader);
    let new_leader = ensemble
        .wait_for_leader(Duration::from_secs(20))
        .expect("a new leader among the two others");
    assert_ne!(new_leader, leader);

    ensemble.start_again(leader);
    assert_eq!(
        zookeeper_mode(ensemble.port(leader)).as_deref(),
        Some("follower"),
        "the old leader follows the new one"
    );
    assert_eq!(ensemble.leader(), new_leader);
}

/// A server on a free loopback port that echoes what it reads, on each connection.
fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    let address = listener.local_addr().expect("bound");
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut buffer = [0u8; 1024];
                while let Ok(read @ 1..) = stream.read(&mut buffer) {
                    if stream.write_all(&buffer[..read]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

fn connect(proxy: &Proxy) -> TcpStream {
    let stream = TcpStream::connect(proxy.addr()).expect("connect to the proxy");
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("set a read timeout");
    stream
}

/// What `stream` reads within its timeout: `Some` bytes, `Some` empty at its end (or reset),
/// `None` if nothing comes.
fn read(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buffer = [0u8; 64];
    match stream.read(&mut buffer) {
        Ok(read) => Some(buffer[..read].to_vec()),
        Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
        Err(_) => Some(Vec::new()),
    }
}

#[test]
fn the_proxy_passes_bytes_on_cuts_freezes_and_heals() {
    let proxy = Proxy::start(echo_server());
    assert_eq!(proxy.addr(), format!("127.0.0.1:{}", proxy.port()));

    let mut stream = connect(&proxy);
    stream.write_all(b"ping").expect("write");
    assert_eq!(read(&mut stream).as_deref(), Some(&b"ping"[..]));

    // Frozen: the connection stays open, nothing comes back until healed, then it all does.
    proxy.freeze();
    stream.write_all(b"held").expect("write");
    assert_eq!(read(&mut stream), None, "nothing through a frozen proxy");
    let mut during = connect(&proxy);
    during.write_all(b"late").expect("write");
    assert_eq!(read(&mut during), None, "a new connection is held too");
    proxy.heal();
    assert_eq!(read(&mut stream).as_deref(), Some(&b"held"[..]));
    assert_eq!(read(&mut during).as_deref(), Some(&b"late"[..]));

    // Cut: the connections end, new ones are closed at once.
    proxy.cut();
    assert_eq!(
        read(&mut stream).as_deref(),
        Some(&b""[..]),
        "closed by the cut"
    );
    let mut refused = connect(&proxy);
    let _ = refused.write_all(b"lost");
    assert_eq!(
        read(&mut refused).as_deref(),
        Some(&b""[..]),
        "closed at once"
    );

    proxy.heal();
    let mut again = connect(&proxy);
    again.write_all(b"back").expect("write");
    assert_eq!(read(&mut again).as_deref(), Some(&b"back"[..]));
}

#[test]
fn ruok_passes_through_the_proxy_to_a_server_until_it_is_cut() {
    let zk = ZooKeeper::start();
    let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], zk.port())));
    assert_eq!(
        zookeeper_four_letter_word(proxy.port(), "ruok").as_deref(),
        Some("imok")
    );
    proxy.cut();
    assert_ne!(
        zookeeper_four_letter_word(proxy.port(), "ruok").as_deref(),
        Some("imok"),
        "nothing through a cut proxy"
    );
    proxy.heal();
    assert_eq!(
        zookeeper_four_letter_word(proxy.port(), "ruok").as_deref(),
        Some("imok")
    );
}

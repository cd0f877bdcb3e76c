//! A Sentinel that contradicts itself: asked `SENTINEL MASTER`, it names two servers (both
//! primaries) in turn for one configuration epoch, and it drops every subscription at once, so
//! that the client's failover listeners keep asking it too, between the client's own looks. No
//! lock may be taken on either server: the client must see that the Sentinel's answers cannot be
//! trusted, whichever of its threads asked.

mod common;

use common::RedisServer;
use redis_lease::{Client, Error};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// One command read from `reader`, as its words; `None` at the end of the stream.
fn command(reader: &mut impl BufRead) -> Option<Vec<String>> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let count: usize = line.trim().strip_prefix('*')?.parse().ok()?;
    let mut words = Vec::with_capacity(count);
    for _ in 0..count {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let length: usize = line.trim().strip_prefix('$')?.parse().ok()?;
        let mut word = vec![0; length + 2];
        std::io::Read::read_exact(reader, &mut word).ok()?;
        word.truncate(length);
        words.push(String::from_utf8(word).ok()?);
    }
    Some(words)
}

fn bulk(text: &str) -> String {
    format!("${}\r\n{text}\r\n", text.len())
}

/// Serves one connection: `SENTINEL MASTER` names the next of `ports` (counted over every
/// connection), `SUBSCRIBE` is confirmed and the connection closed, anything else is `+OK`.
fn serve(stream: TcpStream, ports: [u16; 2], asked: &AtomicUsize) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    while let Some(words) = command(&mut reader) {
        let verb = words.first().map(|w| w.to_ascii_uppercase());
        let reply = match verb.as_deref() {
            Some("SENTINEL") => {
                let port = ports[asked.fetch_add(1, Ordering::SeqCst) % 2];
                let fields = [
                    ("name", "mymaster".to_owned()),
                    ("ip", "127.0.0.1".to_owned()),
                    ("port", port.to_string()),
                    ("flags", "master".to_owned()),
                    ("config-epoch", "7".to_owned()),
                ];
                let mut reply = format!("*{}\r\n", fields.len() * 2);
                for (name, value) in fields {
                    reply.push_str(&bulk(name));
                    reply.push_str(&bulk(&value));
                }
                reply
            }
            Some("SUBSCRIBE") => {
                let channel = words.get(1).cloned().unwrap_or_default();
                let confirm = format!("*3\r\n{}{}:1\r\n", bulk("subscribe"), bulk(&channel));
                let _ = writer.write_all(confirm.as_bytes());
                return;
            }
            _ => "+OK\r\n".to_owned(),
        };
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

#[test]
fn a_sentinel_naming_two_primaries_in_turn_lets_no_lock_be_taken() {
    let first = RedisServer::start();
    let second = RedisServer::start();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("bound").port();
    let asked = Arc::new(AtomicUsize::new(0));
    let ports = [first.port(), second.port()];
    {
        let asked = Arc::clone(&asked);
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let asked = Arc::clone(&asked);
                thread::spawn(move || serve(stream, ports, &asked));
            }
        });
    }
    let client = Client::sentinel("mymaster", [format!("redis://127.0.0.1:{port}")])
        .command_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .expect("valid settings");
    let lock = client.lock("contradicted").expect("valid");
    let until = Instant::now() + Duration::from_secs(6);
    let mut refused = 0;
    while Instant::now() < until {
        match lock.try_lock() {
            Ok(Some(guard)) => panic!(
                "a lock was taken (token {:?}) on the word of a Sentinel that contradicts itself",
                guard.fencing_token()
            ),
            Ok(None) => panic!("the lock was found held: nobody holds it"),
            Err(Error::Unavailable { .. }) => refused += 1,
            Err(other) => panic!("expected Unavailable, got {other:?}"),
        }
    }
    assert!(refused > 10, "only {refused} attempts");
    assert!(
        asked.load(Ordering::SeqCst) > 2 * refused,
        "the listeners asked too"
    );
    for server in [&first, &second] {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut server.connection())
            .expect("KEYS");
        assert!(keys.is_empty(), "written on a primary: {keys:?}");
    }
}

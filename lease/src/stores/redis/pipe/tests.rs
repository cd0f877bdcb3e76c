//! The shared connection against a real server: replies reach their own callers whatever the
//! deadlines, and a server that stops answering fails every call by its own deadline.

use super::Pipe;
use crate::stores::redis::conn::{Conn, Endpoint, Split};
use redis::Value;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn pipe_to(server: &testkit::RedisServer) -> Arc<Pipe> {
    let endpoint = Endpoint::parse(&server.url()).expect("valid");
    let conn = Conn::open(&endpoint, Instant::now() + Duration::from_secs(5)).expect("open");
    let Split::Halves(halves) = conn.split() else {
        panic!("a plain connection splits");
    };
    Arc::new(Pipe::new(halves))
}

fn echo(text: &str) -> Vec<u8> {
    redis::cmd("ECHO").arg(text).get_packed_command()
}

/// Threads echo their own texts through one pipe while the server stalls now and then (`DEBUG
/// SLEEP` from another connection) past some calls' deadlines. Every reply a caller gets is its
/// own; calls that time out do so by their deadline.
#[test]
fn every_reply_reaches_its_own_caller_whatever_the_deadlines() {
    let server = testkit::RedisServer::start();
    let mut pipes = vec![pipe_to(&server)];
    let (answered, timed_out) = (
        Arc::new(std::sync::atomic::AtomicU64::new(0)),
        Arc::new(std::sync::atomic::AtomicU64::new(0)),
    );
    let stalls = {
        let mut control = server.connection();
        thread::spawn(move || {
            for _ in 0..6 {
                thread::sleep(Duration::from_millis(120));
                let _: redis::RedisResult<()> = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg("0.15")
                    .query(&mut control);
            }
        })
    };
    let shared = Arc::new(parking_lot::Mutex::new(pipes.remove(0)));
    let workers: Vec<_> = (0..16)
        .map(|worker| {
            let (shared, answered, timed_out) =
                (shared.clone(), answered.clone(), timed_out.clone());
            let url = server.url();
            thread::spawn(move || {
                let began = Instant::now();
                let mut n = 0;
                while began.elapsed() < Duration::from_millis(1200) {
                    n += 1;
                    let text = format!("{worker}:{n}");
                    // Some deadlines are shorter than a stall, some longer.
                    let bound = Duration::from_millis(if n % 2 == 0 { 60 } else { 400 });
                    let pipe = {
                        let mut shared = shared.lock();
                        if !shared.is_usable() {
                            let endpoint = Endpoint::parse(&url).expect("valid");
                            let conn =
                                Conn::open(&endpoint, Instant::now() + bound * 4).expect("open");
                            let Split::Halves(halves) = conn.split() else {
                                panic!("a plain connection splits");
                            };
                            *shared = Arc::new(Pipe::new(halves));
                        }
                        shared.clone()
                    };
                    let called = Instant::now();
                    match pipe.call(&echo(&text), 1, called + bound) {
                        Ok(replies) => {
                            assert_eq!(
                                replies,
                                vec![Value::BulkString(text.clone().into_bytes())],
                                "a reply reached another caller"
                            );
                            answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(error) => {
                            assert!(error.is_timeout() || error.is_io_error(), "{error}");
                            timed_out.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    let took = called.elapsed();
                    assert!(
                        took < bound + Duration::from_millis(100),
                        "a call bound to {bound:?} took {took:?}"
                    );
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("no failed assertion");
    }
    stalls.join().expect("no panic");
    let (answered, timed_out) = (
        answered.load(std::sync::atomic::Ordering::Relaxed),
        timed_out.load(std::sync::atomic::Ordering::Relaxed),
    );
    assert!(answered > 100, "{answered} answered");
    assert!(timed_out > 0, "the stalls outlasted some deadlines");
}

/// A frozen server: every caller of the pipe gets a timeout by its own deadline, the pipe is
/// retired, and what one of them wrote behind its call runs after it once the server thaws.
#[test]
fn a_frozen_server_fails_each_call_by_its_deadline_and_what_is_written_behind_runs_after() {
    let server = testkit::RedisServer::start();
    let pipe = pipe_to(&server);
    server.pause();
    let callers: Vec<_> = (0..8u64)
        .map(|n| {
            let pipe = pipe.clone();
            thread::spawn(move || {
                let bound = Duration::from_millis(100 + 50 * n);
                let set = redis::cmd("SET")
                    .arg(format!("k{n}"))
                    .arg("v")
                    .get_packed_command();
                let called = Instant::now();
                let result = pipe.call(&set, 1, called + bound);
                let took = called.elapsed();
                assert!(result.is_err(), "{result:?}");
                assert!(
                    took >= bound && took < bound + Duration::from_millis(100),
                    "bound {bound:?}, took {took:?}"
                );
                if n == 0 {
                    let undo = redis::cmd("DEL").arg("k0").get_packed_command();
                    pipe.send_behind(&undo, Instant::now() + Duration::from_millis(50));
                }
            })
        })
        .collect();
    for caller in callers {
        caller.join().expect("no failed assertion");
    }
    assert!(!pipe.is_usable(), "retired");
    let refused = pipe.call(&echo("late"), 1, Instant::now() + Duration::from_secs(1));
    assert!(refused.is_err(), "no new call on a retired pipe");
    server.resume();
    let mut check = server.connection();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let k7: Option<String> = redis::cmd("GET").arg("k7").query(&mut check).expect("get");
        if k7.is_some() || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let (k0, k7): (Option<String>, Option<String>) = redis::pipe()
        .cmd("GET")
        .arg("k0")
        .cmd("GET")
        .arg("k7")
        .query(&mut check)
        .expect("get");
    assert_eq!(
        k7.as_deref(),
        Some("v"),
        "the calls ran once the server thawed"
    );
    assert_eq!(k0, None, "the DEL written behind SET k0 ran after it");
}

/// A server that sends a reply nobody asked for is out of step: every call fails at once.
#[test]
fn a_reply_nobody_asked_for_fails_the_pipe() {
    let server = testkit::RedisServer::start();
    let pipe = pipe_to(&server);
    let deadline = Instant::now() + Duration::from_secs(2);
    // Two commands written as if they were one call: the second reply is unasked for.
    let mut bytes = echo("a");
    bytes.extend(echo("b"));
    let first = pipe.call(&bytes, 1, deadline).expect("the first reply");
    assert_eq!(first, vec![Value::BulkString(b"a".to_vec())]);
    let next = pipe.call(&echo("c"), 1, deadline);
    assert!(next.is_err() || pipe.is_usable(), "{next:?}");
    if let Ok(replies) = next {
        assert_ne!(
            replies,
            vec![Value::BulkString(b"b".to_vec())],
            "out of step"
        );
    }
}

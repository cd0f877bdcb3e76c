//! `LISTEN`/`NOTIFY`: a notification from another connection wakes a waiter at once, one that
//! comes during another call is kept, and a wait with nothing to read ends by its deadline with
//! the connection still usable.

mod common;

use common::{connect, soon};
use std::thread;
use std::time::{Duration, Instant};
use testkit::PgServer;

#[test]
fn a_notification_from_another_connection_wakes_the_waiter_at_once() {
    let pg = PgServer::start();
    let mut listener = connect(&pg.scram_url());
    listener
        .batch_execute("LISTEN holds", soon())
        .expect("listening");
    let url = pg.scram_url();
    let notifier = thread::spawn(move || {
        let mut conn = connect(&url);
        conn.execute(
            "SELECT pg_notify('holds', $1)",
            &[Some("released a")],
            soon(),
        )
        .expect("notified");
        conn.backend_pid().expect("a pid")
    });
    let started = Instant::now();
    let note = listener
        .wait_notification(started + Duration::from_secs(10))
        .expect("a wait")
        .expect("a notification before the deadline");
    let took = started.elapsed();
    let sender = notifier.join().expect("the notifier");
    assert_eq!(note.channel(), "holds");
    assert_eq!(note.payload(), "released a");
    assert_eq!(note.process_id(), sender);
    assert!(took < Duration::from_secs(5), "woken after {took:?}");
}

#[test]
fn a_wait_with_nothing_to_read_ends_by_its_deadline_and_the_connection_goes_on() {
    let pg = PgServer::start();
    let mut listener = connect(&pg.scram_url());
    listener
        .batch_execute("LISTEN quiet", soon())
        .expect("listening");
    let started = Instant::now();
    let deadline = started + Duration::from_millis(300);
    let nothing = listener.wait_notification(deadline).expect("not a failure");
    let took = started.elapsed();
    assert!(nothing.is_none());
    assert!(Instant::now() >= deadline, "ended early: {took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(listener.is_usable());
    listener.ping(soon()).expect("still answers");
    let past = listener
        .wait_notification(Instant::now() - Duration::from_millis(1))
        .expect("a deadline already past is no failure");
    assert!(past.is_none());
}

#[test]
fn notifications_that_come_during_other_calls_are_kept() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    conn.batch_execute("LISTEN mine", soon())
        .expect("listening");
    // A session's own notification comes right after its transaction commits, inside the call.
    let mut pipeline = postgres_blocking::Pipeline::new();
    for payload in ["1", "2", "3"] {
        pipeline
            .push("SELECT pg_notify('mine', $1)", &[Some(payload)])
            .expect("encoded");
    }
    conn.pipeline(&pipeline, soon()).expect("sent");
    let row = conn
        .query_one("SELECT 1", &[], soon())
        .expect("another call");
    assert_eq!(row.get::<i32>(0).expect("an int"), 1);
    let first = conn
        .wait_notification(Instant::now())
        .expect("a wait")
        .expect("kept, no waiting needed");
    assert_eq!(first.payload(), "1");
    let rest: Vec<String> = conn
        .take_notifications()
        .into_iter()
        .map(|note| note.payload().to_owned())
        .collect();
    assert_eq!(rest, ["2", "3"]);
    assert!(conn.take_notifications().is_empty());
}
